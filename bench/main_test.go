package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRun_Usage(t *testing.T) {
	for _, args := range [][]string{
		{"--groups", "nope"},
		{"--waiters", "x"},
		{"--rounds", "0"},
		{"--no-such-flag"},
		{}, // no servers given
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr: %s", args, code, errb.String())
		}
	}
}

func TestRun_UnreachableServer_Fails(t *testing.T) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, []string{"--quick", "--groups", "redis", "--redis", "127.0.0.1:1"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "redis") {
		t.Errorf("exit %d, stderr %q; want 1 naming redis", code, errb.String())
	}
}

func TestWithParam(t *testing.T) {
	if got := withParam("postgres://h/db?sslmode=disable", "a=b"); got != "postgres://h/db?sslmode=disable&a=b" {
		t.Error(got)
	}
	if got := withParam("postgres://h/db", "a=b"); got != "postgres://h/db?a=b" {
		t.Error(got)
	}
}
