package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/bounds"
)

func init() {
	addIf[Crasher]("Crash_HolderDies_OtherAcquiresWithinTTL", "Crasher", testCrash)
	add("PausedHolder_LosesLease_StaleReleaseAndWriteRefused", testPausedHolder)
	add("Refresh_KeepsLeaseAliveForThreeTTLs", testRefresh)
	add("AutoRefresh_ByDefault_KeepsLeaseAliveForThreeTTLs", testAutoRefresh)
	add("Do_RefreshesAndReleases", testDo)
	add("Do_LeaseLost_CancelsContext", testDoLost)
	addIf[Crasher]("Do_ClientCrashes_CancelsContext", "Crasher", testDoCrash)
}

// testCrash: a holder's client dies without releasing; the service frees the
// lock by itself.
func testCrash(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := s.tryAcquire(t, a, k, locker.WithTTL(s.ttl))
	s.h.(Crasher).Crash(t, a)

	start, ctx := time.Now(), s.ctx(t, s.ttl+s.slack)
	next, err := b.Acquire(ctx, k, locker.WithTTL(s.ttl))
	if err != nil {
		t.Fatalf("Acquire after the holder crashed: %v (want the lock within TTL %v + slack %v)", err, s.ttl, s.slack)
	}
	bounds.Took(t, "Acquire after the holder crashed", time.Since(start), s.ttl+s.slack)
	if next.Token() <= lease.Token() {
		t.Fatalf("token after crash %d, want > %d", next.Token(), lease.Token())
	}
	s.release(t, next)
}

// testPausedHolder is the GC-pause story: the holder stops refreshing past
// its TTL, a new holder takes over, and the old holder's late release and
// write must change nothing.
func testPausedHolder(t *testing.T, s *suite) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	k := key(t, "k")
	guard := fencing.NewMemory()

	old := s.tryAcquire(t, a, k, locker.WithTTL(s.ttl), locker.WithAutoRefresh(false)) // paused: no refresh
	if err := guard.Admit(s.ctx(t, s.opTimeout()), k, old.Token()); err != nil {
		t.Fatalf("guard refused the first holder: %v", err)
	}
	waitDone(t, old, s.ttl+s.slack, "the deadline passed without a refresh")
	if now := time.Now(); now.Before(old.Deadline()) {
		t.Fatalf("Done closed at %v, before the deadline %v", now, old.Deadline())
	}
	if err := old.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Err() after the deadline = %v, want ErrLeaseLost", err)
	}

	// The new holder's lease refreshes itself (the default): a TTL longer
	// than the suite's is not needed, and ZooKeeper refuses one longer than
	// its session timeout.
	start := time.Now()
	next, err := b.Acquire(s.ctx(t, s.ttl+s.slack), k, locker.WithTTL(s.ttl))
	if err != nil {
		t.Fatalf("Acquire after the holder's TTL: %v", err)
	}
	bounds.Took(t, "Acquire after the holder's TTL", time.Since(start), s.ttl+s.slack)
	if next.Token() <= old.Token() {
		t.Fatalf("new token %d, want > %d", next.Token(), old.Token())
	}
	if err := guard.Admit(s.ctx(t, s.opTimeout()), k, next.Token()); err != nil {
		t.Fatalf("guard refused the new holder: %v", err)
	}

	// The old holder wakes up.
	if err := old.Refresh(s.ctx(t, s.opTimeout())); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("stale Refresh = %v, want ErrLeaseLost", err)
	}
	if err := old.Release(s.ctx(t, s.opTimeout())); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
	if err := guard.Admit(s.ctx(t, s.opTimeout()), k, old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale write admitted: %v, want ErrStaleToken", err)
	}
	// The new holder's lock is intact.
	if l, err := c.TryAcquire(s.ctx(t, s.opTimeout()), k); !errors.Is(err, locker.ErrLocked) {
		if l != nil {
			_ = l.Release(s.ctx(t, s.opTimeout()))
		}
		if lost := next.Err(); lost != nil {
			t.Fatalf("after the stale release, TryAcquire by a third client = %v, want ErrLocked; the new holder's lease had ended (%v), so whether the stale release freed its lock is not known", err, lost)
		}
		t.Fatalf("after the stale release, TryAcquire by a third client = %v, want ErrLocked: the stale release freed the new holder's lock", err)
	}
	if err := next.Err(); err != nil {
		t.Fatalf("new holder's Err() = %v, want nil", err)
	}
	s.release(t, next)
}

// holdFor checks, for three TTLs and a half, that lease stays held and that
// another client cannot take its key. refresh, if not nil, is called every
// quarter TTL.
func (s *suite) holdFor(t *testing.T, lease locker.Lease, other locker.Locker, refresh func() error) {
	t.Helper()
	end := time.Now().Add(3*s.ttl + s.ttl/2)
	for time.Now().Before(end) {
		time.Sleep(s.ttl / 4)
		if refresh != nil {
			if err := refresh(); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("lease ended while refreshed: %v", err)
		}
	}
	// ErrUnavailable says nothing either way (on a loaded machine a
	// ZooKeeper client's connection dropped under the call: "zk:
	// connection closed"), so the other client asks again, within the
	// bound of one call.
	ctx := s.ctx(t, s.opTimeout())
	l, err := other.TryAcquire(ctx, lease.Key())
	for errors.Is(err, locker.ErrUnavailable) && ctx.Err() == nil {
		t.Logf("another client's TryAcquire = %v; asking again", err)
		time.Sleep(s.ttl / 10)
		l, err = other.TryAcquire(ctx, lease.Key())
	}
	if !errors.Is(err, locker.ErrLocked) {
		if l != nil {
			_ = l.Release(s.ctx(t, s.opTimeout()))
		}
		t.Fatalf("after three TTLs, another client's TryAcquire = %v, want ErrLocked", err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("lease ended while the other client asked: %v", err)
	}
}

func testRefresh(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	lease := s.tryAcquire(t, a, key(t, "k"), locker.WithTTL(s.ttl), locker.WithAutoRefresh(false))
	first := lease.Deadline()
	s.holdFor(t, lease, b, func() error { return lease.Refresh(s.ctx(t, s.opTimeout())) })
	if !lease.Deadline().After(first) {
		t.Fatalf("Deadline() %v not moved past %v by refreshes", lease.Deadline(), first)
	}
	s.release(t, lease)
}

// testAutoRefresh: a lease refreshes itself unless told not to; held for
// three TTLs without any call, it stays valid and its key stays locked.
func testAutoRefresh(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	lease := s.tryAcquire(t, a, key(t, "k"), locker.WithTTL(s.ttl))
	if got := locker.GrantedTTL(lease); got < s.ttl {
		t.Fatalf("GrantedTTL = %v, want at least the TTL asked for, %v", got, s.ttl)
	}
	s.holdFor(t, lease, b, nil)
	s.release(t, lease)
}

func testDo(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	ran := false
	err := locker.Do(s.ctx(t, s.opTimeout()), a, k, func(ctx context.Context, lease locker.Lease) error {
		ran = true
		s.holdFor(t, lease, b, nil)
		return ctx.Err()
	}, locker.WithTTL(s.ttl))
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if !ran {
		t.Fatal("Do did not run its function")
	}
	// Released on return.
	s.release(t, s.tryAcquire(t, b, k))

	sentinel := errors.New("fn failed")
	err = locker.Do(s.ctx(t, s.opTimeout()), a, k, func(context.Context, locker.Lease) error { return sentinel })
	if !errors.Is(err, sentinel) {
		t.Fatalf("Do = %v, want the function's error", err)
	}
	s.release(t, s.tryAcquire(t, b, k))
}

// testDoLost: closing the Locker ends the lease while fn runs; fn's context
// is cancelled with the loss as its cause, and Do reports it.
func testDoLost(t *testing.T, s *suite) {
	a := s.locker(t)
	var cause error
	err := locker.Do(s.ctx(t, s.opTimeout()), a, key(t, "k"), func(ctx context.Context, _ locker.Lease) error {
		if err := a.Close(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(s.opTimeout()):
			return errors.New("context not cancelled after the lease was lost")
		}
	}, locker.WithTTL(s.ttl))
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Do = %v, want ErrLeaseLost", err)
	}
	if !errors.Is(cause, locker.ErrLeaseLost) {
		t.Fatalf("context.Cause = %v, want ErrLeaseLost", cause)
	}
}

// testDoCrash: the client loses the service while fn runs; fn's context is
// cancelled by the local deadline at the latest.
func testDoCrash(t *testing.T, s *suite) {
	a := s.locker(t)
	err := locker.Do(s.ctx(t, s.opTimeout()), a, key(t, "k"), func(ctx context.Context, _ locker.Lease) error {
		s.h.(Crasher).Crash(t, a)
		start := time.Now()
		select {
		case <-ctx.Done():
			bounds.Took(t, "Do's context cancelled after the client crashed", time.Since(start), s.ttl+s.slack)
			return nil
		case <-time.After(s.ttl + s.slack):
			return errors.New("context not cancelled by the deadline after the client crashed")
		}
	}, locker.WithTTL(s.ttl))
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Do = %v, want ErrLeaseLost", err)
	}
}
