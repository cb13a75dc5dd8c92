package etcd_test

import (
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
)

// lockerWithPrefix returns a Locker of the harness's cluster whose keys live
// under prefix instead of the harness's own.
func lockerWithPrefix(t *testing.T, h *harness, prefix string) locker.Locker {
	t.Helper()
	l, err := etcd.New(h.newClient(t), etcd.WithPrefix(prefix), etcd.WithRequestTimeout(2*time.Second))
	if err != nil {
		t.Fatalf("new locker with prefix %q: %v", prefix, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestEtcd_NestedPrefixes_AreIndependent: a Locker whose prefix is P/ and
// one whose prefix is P/k/ share no lock, whichever holds first: the range
// of P/'s key "k" must not contain the locks of P/k/.
func TestEtcd_NestedPrefixes_AreIndependent(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	outer := lockerWithPrefix(t, h, h.prefix)
	inner := lockerWithPrefix(t, h, h.prefix+"k/")

	held, err := inner.TryAcquire(ctxFor(t, 10*time.Second), "anything")
	if err != nil {
		t.Fatalf("inner TryAcquire(anything): %v", err)
	}
	got, err := outer.TryAcquire(ctxFor(t, 10*time.Second), "k")
	if err != nil {
		t.Fatalf("outer TryAcquire(k) while inner holds %q = %v, want it granted: prefixes %q and %q must be independent", "anything", err, h.prefix, h.prefix+"k/")
	}
	if err := got.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("outer Release: %v", err)
	}
	got, err = outer.Acquire(ctxFor(t, 5*time.Second), "k")
	if err != nil {
		t.Fatalf("outer Acquire(k) while inner holds %q = %v, want it granted at once", "anything", err)
	}
	// And the other way round: the outer lock does not hold up the inner one.
	if err := held.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("inner Release: %v", err)
	}
	again, err := inner.TryAcquire(ctxFor(t, 10*time.Second), "anything")
	if err != nil {
		t.Fatalf("inner TryAcquire(anything) while outer holds %q = %v, want it granted", "k", err)
	}
	for _, l := range []locker.Lease{got, again} {
		if err := l.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}
