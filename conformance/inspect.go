package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
)

// Inspection (locker.Inspect, locker.List) is an optional ability of a
// backend; these subtests run for every backend that has it.

func init() {
	inspecting := func(s *suite) bool { return s.inspects }
	addWhen("Inspect_ShowsHolderTokenAndWaiters", "inspection", inspecting, testInspectHeld)
	addWhen("Inspect_FreeAfterReleaseAndExpiry", "inspection", inspecting, testInspectFree)
	addWhen("List_PrefixWithinNamespace", "inspection", inspecting, testList)
}

// inspectUntil inspects key until ok accepts what it shows or the bound
// passes; it returns the last LockInfo. A look the backend did not answer
// in time (ErrUnavailable) is only a look missed, and the next one is
// made, within the bound: a loaded CI run's etcd took longer than the
// harness's 2 s request timeout to answer one look at a semaphore's 24
// waiters being queued, and the test failed on that look alone.
func (s *suite) inspectUntil(t *testing.T, l locker.Locker, key string, bound time.Duration, ok func(locker.LockInfo) bool) locker.LockInfo {
	t.Helper()
	end := time.Now().Add(bound)
	for {
		info, err := locker.Inspect(s.ctx(t, s.opTimeout()), l, key)
		if errors.Is(err, locker.ErrUnavailable) && time.Now().Before(end) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("Inspect(%q): %v", key, err)
		}
		if ok(info) || time.Now().After(end) {
			bounds.Took(t, "Inspect until it showed the wanted state", bound-time.Until(end), bound)
			return info
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testInspectHeld: another client sees the holder's label and token, a time
// left no longer than the TTL, and the waiters queued behind it; never the
// owner id.
func testInspectHeld(t *testing.T, s *suite) {
	a, b, c := s.locker(t, locker.WithOwner("conformance-holder")), s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := s.tryAcquire(t, a, k)
	info, err := locker.Inspect(s.ctx(t, s.opTimeout()), c, k)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !info.Held || info.Key != k || info.Owner != "conformance-holder" || info.Token != lease.Token() {
		t.Fatalf("Inspect of a held key = %+v, want held, key %q, owner conformance-holder, token %d", info, k, lease.Token())
	}
	if granted := locker.GrantedTTL(lease); info.TTL > granted+time.Second {
		t.Fatalf("Inspect: %v left, more than the granted TTL %v", info.TTL, granted)
	}

	// Two waiters queue behind the holder.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 2)
	for range 2 {
		go func() {
			w, err := b.Acquire(ctx, k)
			if err == nil {
				_ = w.Release(context.Background())
			}
			waited <- err
		}()
	}
	if info.Waiters >= 0 {
		info = s.inspectUntil(t, c, k, s.opTimeout(), func(i locker.LockInfo) bool { return i.Waiters == 2 })
		if info.Waiters != 2 {
			t.Fatalf("Inspect with two acquisitions waiting: Waiters = %d", info.Waiters)
		}
	}
	cancel()
	for range 2 {
		if err := <-waited; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled waiter returned %v", err)
		}
	}
	s.release(t, lease)
}

// testInspectFree: a released key, and a key whose holder stopped
// refreshing past its TTL, show as free.
func testInspectFree(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "released")
	s.release(t, s.tryAcquire(t, a, k))
	if info := s.inspectUntil(t, b, k, s.opTimeout(), func(i locker.LockInfo) bool { return !i.Held }); info.Held {
		t.Fatalf("Inspect after Release = %+v, want free", info)
	}
	k = key(t, "expired")
	lease := s.tryAcquire(t, a, k, locker.WithTTL(s.ttl), locker.WithAutoRefresh(false))
	waitDone(t, lease, s.ttl+s.slack, "the deadline passed without a refresh")
	if info := s.inspectUntil(t, b, k, s.ttl+s.slack, func(i locker.LockInfo) bool { return !i.Held }); info.Held {
		t.Fatalf("Inspect %v after the TTL = %+v, want free", s.ttl+s.slack, info)
	}
}

// testList: List yields the held locks under a prefix, decoded back to the
// keys their Locker used, and none of another namespace.
func testList(t *testing.T, s *suite) {
	ns := key(t, "ns")
	a := s.locker(t, locker.WithNamespace(ns))
	plain := s.locker(t)
	for _, k := range []string{"p/a", "p/b", "q/c"} {
		lease := s.tryAcquire(t, a, k)
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
	}
	other := s.tryAcquire(t, plain, ns+"p/x") // outside a's namespace, same stored prefix text
	t.Cleanup(func() { _ = other.Release(context.Background()) })

	var got []string
	for info, err := range locker.List(s.ctx(t, s.opTimeout()), a, "p/") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if !info.Held || info.Token == 0 {
			t.Fatalf("List yielded %+v, want held locks with tokens", info)
		}
		got = append(got, info.Key)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"p/a", "p/b"}) {
		t.Fatalf("List(p/) in a namespace = %q, want [p/a p/b]", got)
	}
	n := 0
	for info, err := range locker.List(s.ctx(t, s.opTimeout()), a, "") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if info.Key == ns+"p/x" {
			t.Fatal("List in a namespace yielded a lock of no namespace")
		}
		n++
	}
	if n != 3 {
		t.Fatalf("List(\"\") in a namespace yielded %d locks, want 3", n)
	}
}
