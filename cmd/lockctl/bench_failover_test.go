//go:build unix

package main

import (
	"strings"
	"testing"
	"time"
)

// A ZooKeeper lock lives as long as its session: the failover bench asks
// for a session timeout of the election's TTL unless the URL names one.
func TestFailoverURL_ZooKeeperSessionIsTheTTL(t *testing.T) {
	for in, want := range map[string]string{
		"zookeeper://h:2181":                      "zookeeper://h:2181?session_timeout=2s",
		"zookeeper://h:2181/r?session_timeout=5s": "zookeeper://h:2181/r?session_timeout=5s",
		"redis://h:6379/0":                        "redis://h:6379/0",
	} {
		if got := failoverURL(in, 2*time.Second); got != want {
			t.Errorf("failoverURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// memory:// has no leader process to kill: it is skipped, and said so.
func TestBench_Failover_MemorySkipped(t *testing.T) {
	a, stdout, stderr := testApp()
	if code := a.bench(t.Context(), []string{"--failover", "2", "--backend", "memory://"}); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "memory:// skipped") {
		t.Errorf("stderr does not say memory was skipped:\n%s", stderr)
	}
	if !strings.Contains(stdout.String(), "| backend | TTL | trials | p50 | max | min |") || strings.Contains(stdout.String(), "| memory") {
		t.Errorf("stdout is not an empty failover table:\n%s", stdout)
	}
}
