package zookeeper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
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
	got := acquireThenRelease(ctx, b, "k")
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

// TestPartition_WaitersSessionsExpire_DirectoryRemoved_AcquireQueuesAgain:
// a waiter cut off past its session loses its node; the holder then
// releases, and the server removes the lock directory, an empty container
// (its container manager does within a minute; deleted here at once). When
// the waiter reconnects, it looks at a queue whose directory is gone: its
// node went with it, so it queues again (making the directory anew) instead
// of failing as unavailable on "node does not exist" — which a quiet CI run
// (2026-12-01) saw TestPartition_WaiterConnectionReset_AcquireKeepsWaiting
// do. One waiter: a second one that queued again first would make the
// directory anew for both.
func TestPartition_WaitersSessionsExpire_DirectoryRemoved_AcquireQueuesAgain(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	a := dial(t, []string{srv.Addr()}, root)
	admin := rawConn(t, []string{srv.Addr()}, nil)
	ctx := ctxT(t, 2*time.Minute)
	held, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	b := dial(t, []string{proxy.Addr()}, root)
	got := acquireThenRelease(ctx, b, "k")
	dir := lockDir(root, "k")
	waitQueue(t, admin, dir, 2)

	proxy.ResetPeer(t)
	// The waiter's session expires: only the holder's node is left.
	deadline := time.Now().Add(time.Minute)
	for {
		kids, _, err := admin.Children(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off waiter's node is still there: %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(dir, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	proxy.Heal(t)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter's Acquire after its session expired and the directory went: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter was never granted the lock")
	}
}

// acquireThenRelease runs l's Acquire of key in the background, releases
// what it got, and sends the first error (or nil) on the channel.
func acquireThenRelease(ctx context.Context, l locker.Locker, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, key)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	return got
}
