package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
)

// N-permit locks (locker.WithLimit) are an optional ability of a backend;
// these subtests run for every backend that has it.

func init() {
	permitting := func(s *suite) bool { return s.permits }
	addWhen("Permits_AtMostNHolders_UniqueTokens", "permits", permitting, testPermitsContention)
	addWhen("Permits_NPlusOneth_WaitsForAFreedPermit", "permits", permitting, testPermitsHandoff)
	addWhen("Permits_LimitMismatch_ErrInvalidOption", "permits", permitting, testPermitsMismatch)
	addWhen("Permits_CancelledWaiter_LeavesNothing", "permits", permitting, testPermitsCancel)
	addWhen("Permits_CrashedHolder_PermitReturns", "permits and Crasher", func(s *suite) bool {
		_, ok := s.h.(Crasher)
		return s.permits && ok
	}, testPermitsCrash)
	addWhen("Permits_FIFO_WaitersServedInArrivalOrder", "permits and a FIFO promise", func(s *suite) bool {
		f, ok := s.h.(FIFOHarness)
		return s.permits && ok && f.FIFO()
	}, testPermitsFIFO)
	addWhen("Permits_MinHold_EarlyReleaseStillCounts", "permits and minimum holds", func(s *suite) bool {
		return s.permits && s.minHolds
	}, testPermitsMinHold)
	addWhen("Permits_MinHold_CrashedHolder_FreesAfterMinHold", "permits, minimum holds and Crasher", func(s *suite) bool {
		_, ok := s.h.(Crasher)
		return s.permits && s.minHolds && ok
	}, testPermitsMinHoldCrash)
	addWhen("Permits_NoHerd_ReleaseWakesOneWaiter", "permits, inspection and a WakeCounter", func(s *suite) bool {
		_, ok := s.h.(WakeCounter)
		return s.permits && s.inspects && ok
	}, testPermitsNoHerd)
}

// WakeCounter is an optional Harness capability: Wakeups reports how many
// times so far a blocking Acquire of the harness's Lockers looked again
// whether the lock or a permit was free, after it was woken (by a watch, a
// notification, a handoff or a timer) — the count a herd multiplies. It
// may count every Locker of the process: the suite reads it before and
// after a subtest, which runs alone.
type WakeCounter interface{ Wakeups() int64 }

const permitsN = 3

// testPermitsContention: 8×N goroutines over several clients take permits
// of one key again and again; a counter of holders, changed inside the
// hold, never exceeds N, and no token is handed out twice.
func testPermitsContention(t *testing.T, s *suite) {
	k := key(t, "sem")
	var (
		holders, most atomic.Int32
		mu            sync.Mutex
		tokens        = map[uint64]bool{}
		wg            sync.WaitGroup
		errs          = make(chan error, 8*permitsN)
	)
	ctx := s.ctx(t, 4*s.opTimeout())
	lockers := []locker.Locker{s.locker(t), s.locker(t), s.locker(t), s.locker(t)}
	for g := range 8 * permitsN {
		l := lockers[g%len(lockers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				lease, err := l.Acquire(ctx, k, locker.WithLimit(permitsN))
				if err != nil {
					errs <- err
					return
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				dup := tokens[lease.Token()]
				tokens[lease.Token()] = true
				mu.Unlock()
				if dup {
					errs <- errors.New("a token was handed out twice")
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if err := lease.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("permits under contention: %v", err)
	}
	if m := most.Load(); m > permitsN {
		t.Fatalf("%d holders at once, limit %d", m, permitsN)
	}
	if len(tokens) != 3*8*permitsN {
		t.Fatalf("%d distinct tokens for %d grants", len(tokens), 3*8*permitsN)
	}
}

// testPermitsHandoff: with N permits held, one more TryAcquire is locked
// and an Acquire waits; a released permit goes to it, with a larger token.
func testPermitsHandoff(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "sem")
	var held []locker.Lease
	for range permitsN {
		held = append(held, s.tryAcquire(t, a, k, locker.WithLimit(permitsN)))
	}
	if _, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k, locker.WithLimit(permitsN)); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire with every permit held = %v, want ErrLocked", err)
	}
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := b.Acquire(s.ctx(t, s.opTimeout()), k, locker.WithLimit(permitsN))
		if err != nil {
			t.Errorf("Acquire of a freed permit: %v", err)
		}
		got <- lease
	}()
	s.release(t, held[0])
	next := <-got
	if next == nil {
		t.FailNow()
	}
	for _, h := range held {
		if next.Token() <= h.Token() {
			t.Errorf("the freed permit's token %d is not above an earlier one, %d", next.Token(), h.Token())
		}
	}
	s.release(t, next)
	for _, h := range held[1:] {
		s.release(t, h)
	}
}

// testPermitsMismatch: holders that disagree on N get an error, not a
// silently different limit.
func testPermitsMismatch(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "sem")
	lease := s.tryAcquire(t, a, k, locker.WithLimit(2))
	for _, opt := range []locker.Option{locker.WithLimit(3), locker.WithLimit(1)} {
		other, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k, opt)
		if !errors.Is(err, locker.ErrInvalidOption) {
			if other != nil {
				_ = other.Release(context.Background())
			}
			t.Fatalf("TryAcquire with another limit = %v, want ErrInvalidOption", err)
		}
	}
	s.release(t, lease)
}

// fillPermits takes every permit of k with l.
func (s *suite) fillPermits(t *testing.T, l locker.Locker, k string) []locker.Lease {
	t.Helper()
	held := make([]locker.Lease, 0, permitsN)
	for range permitsN {
		held = append(held, s.tryAcquire(t, l, k, locker.WithLimit(permitsN)))
	}
	return held
}

// testPermitsCancel: a waiter that gives up leaves no trace: once the
// permits are released, every one of them is free for newcomers at once,
// and inspection (where the backend has it) shows no waiter.
func testPermitsCancel(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "sem")
	held := s.fillPermits(t, a, k)
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl/2)
	defer cancel()
	if lease, err := b.Acquire(ctx, k, locker.WithLimit(permitsN)); !errors.Is(err, context.DeadlineExceeded) {
		if lease != nil {
			_ = lease.Release(context.Background())
		}
		t.Fatalf("Acquire with every permit held, given up after %v = %v, want context.DeadlineExceeded", s.ttl/2, err)
	}
	for _, h := range held {
		s.release(t, h)
	}
	if s.inspects {
		info := s.inspectUntil(t, b, k, s.opTimeout(), func(i locker.LockInfo) bool { return i.Waiters <= 0 })
		if info.Waiters > 0 {
			t.Fatalf("Inspect after a cancelled wait: %d waiters, want none", info.Waiters)
		}
	}
	for _, h := range s.fillPermits(t, b, k) {
		s.release(t, h)
	}
}

// testPermitsCrash: the permit of a holder whose client died returns within
// the TTL and the backend's slack, to a waiter, while the other permits stay
// held.
func testPermitsCrash(t *testing.T, s *suite) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	k := key(t, "sem")
	s.tryAcquire(t, a, k, locker.WithLimit(permitsN), locker.WithTTL(s.ttl))
	var others []locker.Lease
	for range permitsN - 1 {
		others = append(others, s.tryAcquire(t, b, k, locker.WithLimit(permitsN)))
	}
	s.h.(Crasher).Crash(t, a)
	start := time.Now()
	lease, err := c.Acquire(s.ctx(t, s.ttl+s.slack), k, locker.WithLimit(permitsN), locker.WithTTL(s.ttl))
	if err != nil {
		t.Fatalf("Acquire after a permit's holder crashed: %v (want the permit within TTL %v + slack %v)", err, s.ttl, s.slack)
	}
	bounds.Took(t, "Acquire after a permit's holder crashed", time.Since(start), s.ttl+s.slack)
	s.release(t, lease)
	for _, o := range others {
		s.release(t, o)
	}
}

// testPermitsFIFO: waiters queued one after another get the freed permits
// in that order.
func testPermitsFIFO(t *testing.T, s *suite) {
	const waiters = 5
	k := key(t, "sem")
	inspector := s.locker(t)
	held := s.fillPermits(t, inspector, k)
	lockers := make([]locker.Locker, waiters)
	for i := range lockers {
		lockers[i] = s.locker(t)
		s.release(t, s.tryAcquire(t, lockers[i], key(t, "warm-up")))
	}
	granted := make(chan int, waiters)
	var wg sync.WaitGroup
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(s.ctx(t, s.opTimeout()), k, locker.WithLimit(permitsN))
			if err != nil {
				if !errors.Is(err, locker.ErrClosed) {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			granted <- i
			// Keep the permit: the next waiter gets the next freed one.
			t.Cleanup(func() { _ = lease.Release(context.Background()) })
		}()
		s.waitQueued(t, inspector, k, i+1) // arrival order is what the test controls
	}
	for i := range waiters {
		if i < len(held) {
			s.release(t, held[i])
		}
		if i >= permitsN {
			break // no more permits to free: the rest keep waiting
		}
		select {
		case w := <-granted:
			if w != i {
				t.Fatalf("freed permit %d went to waiter %d, want waiter %d (arrival order)", i, w, i)
			}
		case <-time.After(s.opTimeout()):
			t.Fatalf("freed permit %d went to no waiter within %v", i, s.opTimeout())
		}
	}
	for _, l := range lockers {
		_ = l.Close() // ends the waiters still queued
	}
	wg.Wait()
}

// testPermitsMinHold: a permit released inside its minimum hold still
// counts against the limit until the hold has passed — not earlier.
func testPermitsMinHold(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	d := s.minHold()
	lease, k, asked := s.tryAcquireNew(t, a, "sem", locker.WithLimit(2), locker.WithMinHold(d))
	s.release(t, lease)
	other := s.tryAcquire(t, b, k, locker.WithLimit(2))
	if lease, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k, locker.WithLimit(2)); !errors.Is(err, locker.ErrLocked) {
		if lease != nil {
			_ = lease.Release(context.Background())
		}
		t.Fatalf("TryAcquire with one permit held and one released inside its minimum hold = %v, want ErrLocked", err)
	}
	// Once the hold has passed, the permit is free again.
	took := s.acquireAfter(t, b, k, asked, d+s.slack+s.opTimeout(), locker.WithLimit(2))
	if took < d {
		t.Fatalf("a permit released inside its minimum hold %v was granted again %v after it was asked for", d, took)
	}
	s.checkFreedBy(t, took, d)
	s.release(t, other)
}

// testPermitsMinHoldCrash: the permit of a holder that crashes inside its
// minimum hold stays taken until the minimum hold has passed, and no longer
// than its TTL and slack after that, while the other permit stays held.
func testPermitsMinHoldCrash(t *testing.T, s *suite) {
	a, b, c := s.locker(t), s.locker(t), s.locker(t)
	d := s.minHold()
	_, k, asked := s.tryAcquireNew(t, a, "sem", locker.WithLimit(2), locker.WithTTL(s.ttl), locker.WithMinHold(d))
	other := s.tryAcquire(t, b, k, locker.WithLimit(2))
	s.h.(Crasher).Crash(t, a)
	took := s.acquireAfter(t, c, k, asked, d+s.ttl+s.slack+s.opTimeout(), locker.WithLimit(2))
	if took < d {
		t.Fatalf("the permit of a crashed holder was free %v after it was asked for, inside its minimum hold %v", took, d)
	}
	s.checkFreedBy(t, took, d+s.ttl)
	s.release(t, other)
}

// testPermitsNoHerd: with every permit held and 8×N acquisitions waiting
// across several Lockers, nothing that frees no permit (a refresh) wakes a
// waiter, and each release wakes O(1) of them, not all.
//
// The permits are freed one at a time, each only once the one before went
// to a waiter, so that releases do not coalesce: a herd then wakes every
// waiter still queued at each release, about W²/2 = 300 looks for these
// W = 24. By design a release wakes the first waiter only, whose look
// finds the permit free, and its grant wakes the next, which looks, finds
// none free and becomes the first (memory hands the permit over without a
// second look): two looks per handoff. A third comes where a grant is
// announced to the first waiter (PostgreSQL's NOTIFY) or a waiter granted
// out of turn passes the turn on (etcd); the fourth allowed is for the
// fallback wake-ups of a loaded machine (a watch broken without news, a
// request timed out, PostgreSQL's timed look at half the TTL).
func testPermitsNoHerd(t *testing.T, s *suite) {
	const waiters = 8 * permitsN
	const perHandoff = 4
	k := key(t, "sem")
	// The holder's permits must outlive the whole test, however slowly a
	// loaded machine hands them on: with the harness's short TTL, a CI run
	// (2026-12-03) saw the holder's 5 s ZooKeeper session expire while the
	// waiters queued, and its three permits go to three of them.
	holder := s.longTTLLocker(t)
	held := s.fillPermits(t, holder, k)
	lockers := []locker.Locker{s.locker(t), s.locker(t), s.locker(t), s.locker(t)}
	ctx := s.ctx(t, waiters*s.opTimeout())
	got := make(chan locker.Lease, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		l := lockers[i%len(lockers)]
		go func() {
			lease, err := l.Acquire(ctx, k, locker.WithLimit(permitsN))
			if err != nil {
				errs <- err
				return
			}
			got <- lease
		}()
	}
	info := s.inspectUntil(t, holder, k, s.opTimeout(), func(i locker.LockInfo) bool { return i.Waiters >= waiters })
	if info.Waiters < waiters {
		t.Fatalf("Inspect shows %d waiters within %v, want %d", info.Waiters, s.opTimeout(), waiters)
	}
	wc := s.h.(WakeCounter)
	before := wc.Wakeups()
	for range 2 {
		for _, h := range held {
			if err := h.Refresh(s.ctx(t, s.opTimeout())); err != nil {
				t.Fatalf("Refresh of a held permit: %v", err)
			}
		}
	}
	refreshed := wc.Wakeups() - before
	for i := range waiters {
		s.release(t, held[0])
		held = held[1:]
		select {
		case lease := <-got:
			held = append(held, lease)
		case err := <-errs:
			t.Fatalf("a waiter's Acquire: %v", err)
		case <-time.After(s.opTimeout()):
			t.Fatalf("freed permit %d went to no waiter within %v", i, s.opTimeout())
		}
	}
	woken := wc.Wakeups() - before
	for _, h := range held {
		s.release(t, h)
	}
	t.Logf("%d looks after wake-ups: %d during %d refreshes, then %d for %d permits handed over one by one", woken, refreshed, 2*permitsN, woken-refreshed, waiters)
	if woken > perHandoff*waiters {
		t.Errorf("%d looks after wake-ups for %d permits handed over one by one to %d waiters in %d Lockers (at most %d by design): waiters are woken in a herd",
			woken, waiters, waiters, len(lockers), perHandoff*waiters)
	}
	if woken < waiters {
		t.Errorf("%d looks after wake-ups for %d permits handed over to waiters: the harness's WakeCounter misses some (every grant follows one)", woken, waiters)
	}
}
