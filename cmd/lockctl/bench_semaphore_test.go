package main

import (
	"context"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/testenv"
)

func TestBench_Semaphore_Memory(t *testing.T) {
	a, stdout, stderr := testApp()
	u := "memory://" + t.Name()
	code := a.main(context.Background(), []string{"bench", "--workloads", "semaphore", "--backend", u,
		"--sem-ops", "300", "--sem-hold", "100us", "--rounds", "2"})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"semaphore, 4 permits, 64 contenders  " + u,
		"ok    semaphore on " + u + ": at most ",
		"with 4 permits, over 600 grants",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBench_Semaphore_RealBackends runs the semaphore workload, quick, on
// each server backend: the limit holds on every backend with permits, and
// Redlock's refusal (ErrUnsupported) is reported without failing the run.
func TestBench_Semaphore_RealBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, b := range []struct {
		name, want string
		url        func(t *testing.T) string
	}{
		{"redis", "ok    semaphore on ", func(t *testing.T) string { return "redis://" + testenv.Redis(t).Addr() }},
		{"etcd", "ok    semaphore on ", func(t *testing.T) string { return "etcd://" + testenv.Etcd(t).Addr() + "/" + t.Name() }},
		{"zookeeper", "ok    semaphore on ", func(t *testing.T) string { return "zookeeper://" + testenv.ZooKeeper(t).Addr() + "/lockctl-bench" }},
		{"postgres", "ok    semaphore on ", func(t *testing.T) string { return withQuery(t, testenv.PostgresDB(t), "pool_max_conns", "12") }},
		{"redlock", "n/a   semaphore on redlock://", func(t *testing.T) string {
			return "redlock://" + strings.Join(testenv.RedisMasters(t, 3).Addrs(), ",")
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			a, stdout, stderr := testApp()
			code := a.main(context.Background(), []string{"bench", "--quick", "--workloads", "semaphore", "--floor=false", "--backend", u})
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
			}
			if !strings.Contains(stdout.String(), b.want) {
				t.Errorf("output lacks %q:\n%s", b.want, stdout)
			}
		})
	}
}
