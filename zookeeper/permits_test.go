package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// A permit released out of queue order (not the oldest) goes to the first
// waiter, and the next release to the next one: a waiter that watched only
// the N-th node before its own would sleep through the first release.
// Inspect shows the oldest permit as the holder and counts the nodes past
// the first N as waiters.
func TestPermits_OutOfOrderRelease_WakesWaitersInOrder(t *testing.T) {
	const n = 3
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	// Sessions long enough that no refresh is late on a loaded machine:
	// this test is about the order of wake-ups, not about sessions.
	a := dial(t, servers, root, zookeeper.WithSessionTimeout(steadySession))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []locker.Lease
	for range n {
		lease, err := a.TryAcquire(ctx, "sem", locker.WithLimit(n))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	waitWaiters := func(want int) {
		t.Helper()
		for {
			info, err := locker.Inspect(ctx, a, "sem")
			if err != nil {
				t.Fatal(err)
			}
			if !info.Held || info.Token != held[0].Token() {
				t.Fatalf("Inspect = %+v, want held, by the oldest permit (token %d)", info, held[0].Token())
			}
			if info.Waiters == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("Inspect shows %d waiters, want %d", info.Waiters, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitWaiters(0)
	granted := make([]chan locker.Lease, 2)
	for i := range granted {
		granted[i] = make(chan locker.Lease, 1)
		w := dial(t, servers, root, zookeeper.WithSessionTimeout(steadySession))
		go func() {
			lease, err := w.Acquire(ctx, "sem", locker.WithLimit(n))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			granted[i] <- lease
		}()
		waitWaiters(i + 1) // queued in this order
	}
	for i, h := range []locker.Lease{held[2], held[1]} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lease := <-granted[i]
		if lease == nil {
			t.FailNow()
		}
		defer func() { _ = lease.Release(context.Background()) }()
		if lease.Token() <= held[2].Token() {
			t.Errorf("waiter %d's token %d is not above the earlier permits' (%d)", i, lease.Token(), held[2].Token())
		}
	}
	waitWaiters(0)
}

// A permit waiter whose context ends while it is setting its watches, on a
// connection that answers them later, gives up cleanly: the late replies
// once wrote into the result slice that the give-up had set to nil, and
// the panic ("index out of range [0] with length 0") killed the process.
// Each round trip through the proxy takes 200 ms more, and the waits end
// at every step of an acquisition in turn, so one ends inside the watches.
func TestPermits_WaitEndsWhileWatching_LateRepliesHarmless(t *testing.T) {
	const n, latency = 2, 200 * time.Millisecond
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	a := dial(t, []string{srv.Addr()}, root)
	b := dial(t, []string{proxy.Addr()}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range n {
		lease, err := a.TryAcquire(ctx, "sem", locker.WithLimit(n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
	}
	proxy.Latency(t, latency)
	defer proxy.Heal(t)
	for d := latency; d <= 6*latency; d += latency / 2 {
		wctx, wcancel := context.WithTimeout(ctx, d)
		lease, err := b.Acquire(wctx, "sem", locker.WithLimit(n))
		wcancel()
		if err == nil {
			t.Fatalf("Acquire with every permit held returned a lease (token %d)", lease.Token())
		}
		time.Sleep(2 * latency) // the late replies arrive
	}
}
