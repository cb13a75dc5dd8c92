package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestGuard_StaleToken_RefusedAndItsWriteNotApplied(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	cli := h.newClient(t)
	g := newGuard(t, cli, h.prefix+"fence/")
	ctx := ctxFor(t, 30*time.Second)
	state := h.prefix + "state"

	if _, err := g.Write(ctx, "res", 5, clientv3.OpPut(state, "v5")); err != nil {
		t.Fatalf("Write with token 5: %v", err)
	}
	if _, err := g.Write(ctx, "res", 3, clientv3.OpPut(state, "v3")); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Write with stale token 3 = %v, want ErrStaleToken", err)
	}
	if v := get(t, cli, state); v != "v5" {
		t.Fatalf("state = %q after a refused write, want v5", v)
	}
	// The same token again is admitted (a holder writes many times).
	if _, err := g.Write(ctx, "res", 5, clientv3.OpPut(state, "v5b")); err != nil {
		t.Fatalf("Write with token 5 again: %v", err)
	}
	// Tokens compare as numbers, not as strings: 10 > 9.
	if err := g.Admit(ctx, "res", 9); err != nil {
		t.Fatalf("Admit(9): %v", err)
	}
	if err := g.Admit(ctx, "res", 10); err != nil {
		t.Fatalf("Admit(10) after 9: %v", err)
	}
	if err := g.Admit(ctx, "res", 9); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(9) after 10 = %v, want ErrStaleToken", err)
	}
	if n, err := g.Highest(ctx, "res"); err != nil || n != 10 {
		t.Fatalf("Highest = %d, %v; want 10", n, err)
	}
	if err := g.Admit(ctx, "other", 0); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(0) = %v, want ErrStaleToken", err)
	}
}

func TestGuard_NestedResourceNames_AreIndependent(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	g := newGuard(t, h.newClient(t), h.prefix+"fence/")
	ctx := ctxFor(t, 30*time.Second)
	if err := g.Admit(ctx, "a/b", 100); err != nil {
		t.Fatalf("Admit(a/b, 100): %v", err)
	}
	for _, r := range []string{"a", "a%2Fb", "a\x00b", "a/b/"} {
		if err := g.Admit(ctx, r, 1); err != nil {
			t.Errorf("Admit(%q, 1) after a/b got 100: %v", r, err)
		}
	}
}

func get(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}
