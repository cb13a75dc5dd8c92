package history_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
	"github.com/distlock/locker/memory"
)

// The liveness check's client is made after the faults heal, when a cluster
// may still be electing or reconnecting: making it counts against the
// deployment's liveness bound like its acquisitions, and a failed attempt
// is tried again within that bound — not given a backend's own default
// connect timeout once (the CI failure of TestZooKeeperEnsemble's
// partition_a_majority: "new locker for the liveness check: … context
// deadline exceeded").
func TestLiveness_ClientMadeWithinBound(t *testing.T) {
	store := memory.NewStore()
	const clients = 2
	const liveness = 5 * time.Second
	var made, failures atomic.Int32
	var deadlineLeft atomic.Int64
	newLocker := func(ctx context.Context) (locker.Locker, error) {
		if made.Add(1) <= clients {
			return memory.New(store)
		}
		if dl, ok := ctx.Deadline(); ok {
			deadlineLeft.Store(int64(time.Until(dl)))
		} else {
			deadlineLeft.Store(-1)
		}
		if failures.Add(1) <= 2 { // the cluster is not ready yet
			return nil, errors.New("no session yet")
		}
		return memory.New(store)
	}
	res, err := history.Run(context.Background(), newLocker, history.Options{
		Clients: clients, Keys: 1, Duration: 300 * time.Millisecond, Liveness: liveness, Seed: 1,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v := res.Violations; len(v) > 0 {
		t.Fatalf("violations: %v", v)
	}
	if left := time.Duration(deadlineLeft.Load()); left <= 0 || left > liveness {
		t.Fatalf("the liveness client was made under a deadline %v away, want one within the liveness bound %v", left, liveness)
	}
	// How close the check came to its bound is reported (internal/bounds).
	if res.LivenessBound != liveness || res.LivenessSlowest <= 0 {
		t.Fatalf("Result: LivenessSlowest %v, LivenessBound %v; want a measured step and the bound %v", res.LivenessSlowest, res.LivenessBound, liveness)
	}
}
