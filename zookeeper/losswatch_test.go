package zookeeper_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// TestHeldLocks_NoGoroutinePerLease: each held lock watches its own node
// for its loss, and go-zookeeper delivers every watch on a channel of its
// own. A goroutine waited on each (issue 22: 1 goroutine per held lease).
// Holding many locks must not cost a goroutine each, and the loss of any
// one of them must still be reported, to it alone.
func TestHeldLocks_NoGoroutinePerLease(t *testing.T) {
	const n = 300
	srv := testenv.ZooKeeper(t)
	root := freshRoot(t)
	// A minute's TTL, not refreshed: the refreshes' goroutines must not be
	// what is counted.
	ctx := ctxT(t, 2*time.Minute)
	l, err := locker.Open(ctx, "zookeeper://"+srv.Addr()+root+"?session_timeout=1m", locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Acquire(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	before := settledGoroutines(t)
	leases := make([]locker.Lease, n)
	for i := range leases {
		if leases[i], err = l.Acquire(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A lock sets its loss watch on a goroutine of its own when its grant
	// did not: wait for those to end.
	after := settledGoroutines(t)
	t.Logf("goroutines: %d before, %d after %d locks", before, after, n)
	if grown := after - before; grown > n/10 {
		t.Fatalf("holding %d locks added %d goroutines, want no goroutine per lease", n, grown)
	}

	// Someone deletes one lock's node: that lease alone is lost.
	raw := rawConn(t, []string{srv.Addr()}, nil)
	victim := 137
	kids, _, err := raw.Children(lockDir(root, fmt.Sprintf("k%d", victim)))
	if err != nil || len(kids) != 1 {
		t.Fatalf("the lock directory of k%d holds %v (%v), want one node", victim, kids, err)
	}
	if err := raw.Delete(lockDir(root, fmt.Sprintf("k%d", victim))+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leases[victim].Done():
		if err := leases[victim].Err(); !errors.Is(err, locker.ErrLeaseLost) {
			t.Fatalf("the lease whose node was deleted ended with %v, want ErrLeaseLost", err)
		}
	case <-ctx.Done():
		t.Fatal("the lease whose node another client deleted was not reported lost")
	}
	for i, ls := range leases {
		if i != victim && ls.Err() != nil {
			t.Fatalf("lease %d ended (%v) when another lease's node was deleted", i, ls.Err())
		}
	}
	for _, ls := range leases {
		_ = ls.Release(ctx)
	}
}

// settledGoroutines returns the number of goroutines once it has not
// changed for a second.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	last, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && same < 10; {
		time.Sleep(100 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	return last
}
