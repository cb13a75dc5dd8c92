// Package stalltest is the disk-stall scenario the etcd and ZooKeeper tests
// share: a holder and a waiter of one key while the server's disk stalls
// (internal/slowdisk), and what must hold whatever the server makes of it.
package stalltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/slowdisk"
)

// A Scenario is A holding Key while B waits for it, and the stall.
type Scenario struct {
	Disk *slowdisk.Disk
	A, B locker.Locker
	Key  string
	// Options are given to both acquisitions.
	Options []locker.Option
	// Queued returns once B has queued behind A.
	Queued func(t *testing.T)
	// Stall is how long the disk stalls; During, if not nil, runs once it
	// has stalled (a write that waits for the disk, say).
	Stall  time.Duration
	During func(t *testing.T)
}

// Check runs the scenario. B may be granted the lock only after A's lease
// has ended (ErrLeaseLost, or ErrReleased), and with a larger token; if A
// still holds 10 s after the disk resumed, it releases, and B must then be
// granted. It returns A's lease, ended.
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
		aEnded bool // A's lease had ended when B's Acquire returned
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := s.B.Acquire(ctx, s.Key, s.Options...)
		g := grant{lease: l, err: err}
		select {
		case <-held.Done():
			g.aEnded = true
		default:
		}
		granted <- g
	}()
	s.Queued(t)

	s.Disk.Stall()
	if s.During != nil {
		s.During(t)
	}
	time.Sleep(s.Stall)
	s.Disk.Resume()

	var g grant
	select {
	case g = <-granted:
	case <-time.After(10 * time.Second):
		// Not granted yet. If A still holds (its lease lived through the
		// stall), it hands the lock over when it lets go; if A lost it,
		// B's grant is only slow.
		if held.Err() == nil {
			if err := held.Release(ctx); err != nil {
				t.Fatalf("A's release after the stall: %v", err)
			}
		}
		g = <-granted
	}
	if g.err != nil {
		t.Fatalf("B's Acquire across the stall: %v", g.err)
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
