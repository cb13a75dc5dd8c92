// Package holdtest is the scenario the backends' fault tests share: A holds
// a key and B waits for it while the test breaks the server (a disk stall,
// a clock jump), and what must hold whatever the server makes of it.
package holdtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
)

// A Scenario is A holding Key while B waits for it, and the fault.
type Scenario struct {
	A, B locker.Locker
	Key  string
	// Options are given to both acquisitions.
	Options []locker.Option
	// Queued returns once B has queued behind A.
	Queued func(t *testing.T)
	// Fault breaks the server and heals it before it returns.
	Fault func(t *testing.T)
	// Keeps says the fault lies within what A's lease survives: A must
	// still hold when Fault returns, and B must still wait.
	Keeps bool
}

// Check runs the scenario. B may be granted the lock only after A's lease
// has ended, and with a larger token; if A still holds 10 s after the fault
// healed, it releases, and B must then be granted. It returns A's lease,
// ended.
//
// A's lease has ended when its Done is closed, when its Deadline has passed
// (its timer may not have run yet on a loaded machine), or once its Release
// has begun: the server lets the lock go, and may grant it to B, before
// Release returns and closes Done. B's grant is timed when its Acquire
// returns, a round trip after the server granted it; a grant that came
// less than that before A's Release began goes unnoticed.
func Check(t *testing.T, s Scenario) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, err := s.A.Acquire(ctx, s.Key, s.Options...)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		lease  locker.Lease
		err    error
		at     time.Time
		aEnded bool // A's lease had ended when B's Acquire returned
	}
	var release releaseStart
	granted := make(chan grant, 1)
	go func() {
		l, err := s.B.Acquire(ctx, s.Key, s.Options...)
		g := grant{lease: l, err: err, at: time.Now()}
		select {
		case <-held.Done():
			g.aEnded = true
		default:
			g.aEnded = !g.at.Before(held.Deadline()) || release.before(g.at)
		}
		granted <- g
	}()
	s.Queued(t)

	s.Fault(t)

	var g grant
	if s.Keeps {
		if err := held.Err(); err != nil {
			t.Fatalf("A's lease after the fault: %v, want it still held", err)
		}
		select {
		case g := <-granted:
			t.Fatalf("B's Acquire returned (%v) while A held the lock", g.err)
		default:
		}
		release.begin()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g = <-granted
	} else {
		select {
		case g = <-granted:
		case <-time.After(10 * time.Second):
			// Not granted yet. If A still holds (its lease lived through
			// the fault), it hands the lock over when it lets go; if A
			// lost it, B's grant is only slow.
			if held.Err() == nil {
				release.begin()
				if err := held.Release(ctx); err != nil {
					t.Fatalf("A's release after the fault: %v", err)
				}
			}
			g = <-granted
		}
	}
	if g.err != nil {
		t.Fatalf("B's Acquire across the fault: %v", g.err)
	}
	defer g.lease.Release(ctx)
	if !g.aEnded {
		t.Fatalf("B was granted token %d while A's lease (token %d) had not ended: two holders", g.lease.Token(), held.Token())
	}
	if err := held.Err(); !errors.Is(err, locker.ErrLeaseLost) && !errors.Is(err, locker.ErrReleased) {
		t.Errorf("A's lease ended with %v, want ErrLeaseLost or ErrReleased", err)
	}
	if g.lease.Token() <= held.Token() {
		t.Errorf("B's token %d after A's %d, want larger", g.lease.Token(), held.Token())
	}
	return held
}

// releaseStart is when A's Release began, if it has.
type releaseStart struct {
	mu sync.Mutex
	at time.Time
}

func (r *releaseStart) begin() {
	r.mu.Lock()
	r.at = time.Now()
	r.mu.Unlock()
}

// before reports whether the Release began before t.
func (r *releaseStart) before(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.at.IsZero() && r.at.Before(t)
}
