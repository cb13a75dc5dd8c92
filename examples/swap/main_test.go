package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The same program, given each backend's URL, prints the same lines: the
// ones README.md shows.
func TestSwap_EveryBackendPrintsWhatREADMEShows(t *testing.T) {
	want := readmeOutput(t)
	urls := map[string]func(t *testing.T) string{
		"memory": func(*testing.T) string { return "memory://" },
		"redis":  func(t *testing.T) string { return "redis://" + testenv.Redis(t).Addr() + "/0" },
		"redlock": func(t *testing.T) string {
			return "redlock://" + strings.Join(testenv.RedisMasters(t, 3).Addrs(), ",") + "/"
		},
		"etcd":      func(t *testing.T) string { return "etcd://" + testenv.Etcd(t).Addr() + "/examples-swap" },
		"zookeeper": func(t *testing.T) string { return "zookeeper://" + testenv.ZooKeeper(t).Addr() + "/examples-swap" },
		"postgres":  func(t *testing.T) string { return testenv.PostgresDB(t) },
	}
	for _, name := range []string{"memory", "redis", "redlock", "etcd", "zookeeper", "postgres"} {
		t.Run(name, func(t *testing.T) {
			url := urls[name](t)
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, url, &out); err != nil {
				t.Fatalf("run(%s): %v", name, err)
			}
			if got := out.String(); got != want {
				t.Errorf("%s printed\n%s\nREADME.md shows\n%s", name, got, want)
			}
		})
	}
}

// readmeOutput returns the lines README.md shows under "$ go run ./examples/swap".
func readmeOutput(t *testing.T) string {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "$ go run ./examples/swap"
	_, after, ok := strings.Cut(string(readme), "```text\n"+cmd)
	if !ok {
		t.Fatalf("README.md shows no %q block", cmd)
	}
	_, body, _ := strings.Cut(after, "\n")
	body, _, ok = strings.Cut(body, "```")
	if !ok {
		t.Fatal("README.md: the swap output block is not closed")
	}
	return body
}
