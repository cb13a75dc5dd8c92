package zookeeper_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// TestPartition_WaiterConnectionReset_AcquireKeepsWaiting: a blocking
// Acquire whose connection is reset again and again while it waits holds
// nothing and can lose at most its place in the queue. It goes on waiting —
// the client reconnects, in the same session or a new one — and is granted
// the lock once the holder releases it, instead of failing as unavailable
// (a disk stall that held the server's answers up failed it so).
func TestPartition_WaiterConnectionReset_AcquireKeepsWaiting(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	a := dial(t, []string{srv.Addr()}, root)
	b := dial(t, []string{proxy.Addr()}, root)
	ctx := ctxT(t, 2*time.Minute)
	held, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, "k")
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueue(t, rawConn(t, []string{srv.Addr()}, nil), lockDir(root, "k"), 2)

	// Every connection B makes is reset as soon as bytes flow, for longer
	// than its session lasts.
	proxy.ResetPeer(t)
	time.Sleep(2 * testTTL)
	proxy.Heal(t)
	select {
	case err := <-got:
		t.Fatalf("B's Acquire ended (%v) while A held the lock, want it still waiting", err)
	default:
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("B's Acquire after its connection was reset, once A released: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("B was not granted the lock after A released it")
	}
}
