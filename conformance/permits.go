package conformance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
)

// N-permit locks (locker.WithLimit) are an optional ability of a backend;
// these subtests run for every backend that has it.

func init() {
	permitting := func(s *suite) bool { return s.permits }
	addWhen("Permits_AtMostNHolders_UniqueTokens", "permits", permitting, testPermitsContention)
	addWhen("Permits_NPlusOneth_WaitsForAFreedPermit", "permits", permitting, testPermitsHandoff)
	addWhen("Permits_LimitMismatch_ErrInvalidOption", "permits", permitting, testPermitsMismatch)
}

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
