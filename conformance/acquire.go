package conformance

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
)

func init() {
	add("TryAcquire_FreeKey_GrantsPositiveToken", testTryAcquireFree)
	add("TryAcquire_HeldKey_ReturnsErrLocked", testTryAcquireHeld)
	add("Acquire_WaitsForRelease_ThenLargerToken", testAcquireWaits)
	add("Acquire_ContextExpires_LeavesNothingBehind", testAcquireCancelled)
	add("Release_Twice_IsNoOp", testReleaseTwice)
	add("IndependentKeys_DoNotBlock", testIndependentKeys)
}

func testTryAcquireFree(t *testing.T, s *suite) {
	l := s.locker(t)
	k := key(t, "k")
	lease := s.tryAcquire(t, l, k)
	if lease.Token() == 0 {
		t.Fatal("Token() = 0, want > 0")
	}
	if lease.Key() != k {
		t.Fatalf("Key() = %q, want %q", lease.Key(), k)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("Err() of a held lease = %v, want nil", err)
	}
	if isDone(lease) {
		t.Fatal("Done() closed on a held lease")
	}
	if !lease.Deadline().After(time.Now()) {
		t.Fatalf("Deadline() %v is not in the future", lease.Deadline())
	}
	s.release(t, lease)
	if !isDone(lease) {
		t.Fatal("Done() not closed after Release")
	}
	if err := lease.Err(); !errors.Is(err, locker.ErrReleased) {
		t.Fatalf("Err() after Release = %v, want ErrReleased", err)
	}
}

func testTryAcquireHeld(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	held := s.tryAcquire(t, a, k)
	for _, l := range []locker.Locker{a, b} { // another client, and the holder's own Locker
		lease, err := l.TryAcquire(s.ctx(t, s.opTimeout()), k)
		if !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryAcquire on a held key = (%v, %v), want ErrLocked", lease, err)
		}
		if errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("ErrLocked also matches ErrUnavailable: %v", err)
		}
	}
	s.release(t, held)
	s.release(t, s.tryAcquire(t, b, k))
}

func testAcquireWaits(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	first := s.tryAcquire(t, a, k)

	var released atomic.Bool
	type result struct {
		lease locker.Lease
		err   error
		early bool // acquired while the first lease was still held
	}
	got := make(chan result, 1)
	go func() {
		lease, err := b.Acquire(s.ctx(t, s.opTimeout()), k)
		got <- result{lease, err, !released.Load()}
	}()
	// Long enough for the waiter to be queued; the result must not depend on it.
	time.Sleep(s.ttl / 4)
	released.Store(true)
	s.release(t, first)

	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after release: %v", r.err)
	}
	if r.early {
		t.Fatal("Acquire returned while the key was still held by another client")
	}
	if r.lease.Token() <= first.Token() {
		t.Fatalf("token after handoff %d, want > %d", r.lease.Token(), first.Token())
	}
	s.release(t, r.lease)
}

func testAcquireCancelled(t *testing.T, s *suite) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	k := key(t, "k")
	held := s.tryAcquire(t, a, k)

	wait := s.ttl / 2
	ctx := s.ctx(t, wait)
	lease, err := b.Acquire(ctx, k)
	if !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Fatalf("Acquire with an expiring context = (%v, %v), want the context's error", lease, err)
	}
	if errors.Is(err, locker.ErrLocked) {
		t.Fatalf("a timed-out wait reports ErrLocked: %v", err)
	}
	s.release(t, held)
	// Nothing of the cancelled wait may remain: no queue entry ahead of c.
	s.release(t, s.tryAcquire(t, c, k))
}

func testReleaseTwice(t *testing.T, s *suite) {
	l := s.locker(t)
	lease := s.tryAcquire(t, l, key(t, "k"))
	s.release(t, lease)
	if err := lease.Release(s.ctx(t, s.opTimeout())); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	if err := lease.Refresh(s.ctx(t, s.opTimeout())); !errors.Is(err, locker.ErrReleased) {
		t.Fatalf("Refresh after Release = %v, want ErrReleased", err)
	}
}

func testIndependentKeys(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k1, k2 := key(t, "one"), key(t, "two")
	l1 := s.tryAcquire(t, a, k1)
	l2 := s.tryAcquire(t, b, k2)
	if _, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k1); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire of the held key = %v, want ErrLocked", err)
	}
	s.release(t, l1)
	s.release(t, l2)
}
