package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
)

// Minimum holds (locker.WithMinHold) are an optional ability of a backend;
// these subtests run for every backend that has it.

func init() {
	holding := func(s *suite) bool { return s.minHolds }
	addWhen("MinHold_EarlyRelease_HeldUntilMinHold", "minimum holds", holding, testMinHoldEarlyRelease)
	addWhen("MinHold_ReleaseAfterMinHold_FreesAtOnce", "minimum holds", holding, testMinHoldLateRelease)
	addWhen("MinHold_CrashedHolder_FreesAfterMinHold", "minimum holds and Crasher",
		func(s *suite) bool { _, ok := s.h.(Crasher); return s.minHolds && ok }, testMinHoldCrash)
}

// minHold is the minimum hold of the subtests: longer than the TTL, so that
// a lock freed at the TTL's end, as without it, is caught.
func (s *suite) minHold() time.Duration { return 2 * s.ttl }

// acquireAfter waits, with a blocking Acquire (with opts), for k to be
// granted to l, and returns how long after since that was.
func (s *suite) acquireAfter(t *testing.T, l locker.Locker, k string, since time.Time, bound time.Duration, opts ...locker.Option) time.Duration {
	t.Helper()
	lease, err := l.Acquire(s.ctx(t, bound), k, opts...)
	if err != nil {
		t.Fatalf("Acquire within %v: %v", bound, err)
	}
	took := time.Since(since)
	s.release(t, lease)
	return took
}

// testMinHoldEarlyRelease: a lock released at once stays held until the
// minimum hold has passed since its grant — not earlier — and is then
// handed to a waiter.
func testMinHoldEarlyRelease(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	d := s.minHold()
	lease, k, asked := s.tryAcquireNew(t, a, "k", locker.WithTTL(s.ttl), locker.WithMinHold(d))
	s.release(t, lease)
	if _, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire just after a release inside the minimum hold = %v, want ErrLocked", err)
	}
	took := s.acquireAfter(t, b, k, asked, d+s.slack+s.opTimeout(), locker.WithTTL(s.ttl))
	if took < d {
		t.Fatalf("granted again %v after the first acquisition was asked for, inside its minimum hold %v", took, d)
	}
	s.checkFreedBy(t, took, d)
}

// testMinHoldLateRelease: past the minimum hold, a release frees the lock
// at once.
func testMinHoldLateRelease(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	lease, k, _ := s.tryAcquireNew(t, a, "k", locker.WithTTL(s.ttl), locker.WithMinHold(s.ttl/2))
	time.Sleep(s.ttl / 2)
	s.release(t, lease)
	s.release(t, s.tryAcquire(t, b, k))
}

// testMinHoldCrash: a holder that crashes inside its minimum hold leaves the
// lock held until the minimum hold has passed, and no longer than its TTL
// and slack after that.
func testMinHoldCrash(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	d := s.minHold()
	_, k, asked := s.tryAcquireNew(t, a, "k", locker.WithTTL(s.ttl), locker.WithMinHold(d))
	s.h.(Crasher).Crash(t, a)
	took := s.acquireAfter(t, b, k, asked, d+s.ttl+s.slack+s.opTimeout(), locker.WithTTL(s.ttl))
	if took < d {
		t.Fatalf("the lock of a crashed holder was free %v after it was asked for, inside its minimum hold %v", took, d)
	}
	s.checkFreedBy(t, took, d+s.ttl)
}

// checkFreedBy fails the subtest if a lock or permit that its holder left
// (by a release or a crash) was granted again, took after it was asked
// for, later than it was due (by then) and the backend's slack allow, with
// the room for a loaded machine that the suite's upper bounds leave.
func (s *suite) checkFreedBy(t *testing.T, took, by time.Duration) {
	t.Helper()
	bounds.Took(t, "granted again after the holder left", took, by+s.slack+s.opTimeout()/2)
	if took > by+s.slack+s.opTimeout()/2 {
		t.Fatalf("granted again only %v after the first acquisition was asked for: due by %v, slack %v", took, by, s.slack)
	}
}
