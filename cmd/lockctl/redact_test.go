package main

import (
	"strings"
	"testing"
)

// A report's command line shows no password, whatever form the argument
// that carries it takes.
func TestRedactArgs_NoPassword(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "redis://:hunter2@127.0.0.1:6379/0"},
		{"--backend=redis://u:hunter2@127.0.0.1:6379/0"},
		{"-backend=etcd://u:hunter2@h1:2379,h2:2379/p"},
		{"--backend", "redis://u:hunter2/x@127.0.0.1:6379/0"}, // unescaped '/': does not parse
		{"--backend", "postgres://h/db?password=hunter2&sslmode=disable"},
		{"--backend", "postgres://h/db?sslmode=disable&password=hunter2%zz"}, // does not parse
		{"--backend", "zookeeper://u:hun%40ter2@h:2181/root"},
	} {
		got := redactArgs(args)
		if strings.Contains(got, "hunter2") || strings.Contains(got, "hun%40ter2") {
			t.Errorf("redactArgs(%q) = %q: shows the password", args, got)
		}
		if !strings.Contains(got, "://") {
			t.Errorf("redactArgs(%q) = %q: the URL is gone, not redacted", args, got)
		}
	}
	if got := redactArgs([]string{"--backend", "memory://", "--quick"}); got != "--backend memory:// --quick" {
		t.Errorf("redactArgs without secrets = %q, want the arguments as given", got)
	}
}
