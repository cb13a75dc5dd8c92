package zookeeper_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// BenchmarkInspect: one Inspect (a sync, a listing, a read) of a key held
// by another Locker, with two waiters, on one server and on an ensemble.
func BenchmarkInspect(b *testing.B) {
	for _, dep := range []string{"server", "ensemble"} {
		b.Run(dep, func(b *testing.B) {
			servers := []string{testenv.ZooKeeper(b).Addr()}
			if dep == "ensemble" {
				servers = testenv.ZooKeeperEnsemble(b).Addrs()
			}
			ctx, _, other := heldByAnother(b, servers)
			for range 2 {
				go func() {
					if w, err := other.Acquire(ctx, "k"); err == nil {
						_ = w.Release(context.Background())
					}
				}()
			}
			for b.Loop() {
				if info, err := locker.Inspect(ctx, other, "k"); err != nil || !info.Held {
					b.Fatalf("Inspect = %+v, %v", info, err)
				}
			}
		})
	}
}

// BenchmarkPublishWatched: one Publish by the holder until another Locker's
// Watch yields the new value: the write, the watch event, the watch set
// again and the portable layer's Inspect.
func BenchmarkPublishWatched(b *testing.B) {
	ctx, lease, watcher := heldByAnother(b, []string{testenv.ZooKeeper(b).Addr()})
	var latest atomic.Value
	latest.Store("")
	changed := make(chan struct{}, 1)
	go func() {
		defer close(changed)
		for info, err := range locker.Watch(ctx, watcher, "k") {
			if err != nil {
				return
			}
			latest.Store(info.Value)
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	i := 0
	for b.Loop() {
		i++
		v := fmt.Sprint(i)
		if err := locker.Publish(ctx, lease, v); err != nil {
			b.Fatal(err)
		}
		for latest.Load() != v {
			if _, ok := <-changed; !ok {
				b.Fatal("Watch ended")
			}
		}
	}
}

// heldByAnother returns a context that ends with the benchmark, the lease
// of key k held by one Locker over servers, and another Locker of the same
// root.
func heldByAnother(b *testing.B, servers []string) (context.Context, locker.Lease, locker.Locker) {
	root := freshRoot(b)
	holder, other := dial(b, servers, root, locker.WithOwner("holder")), dial(b, servers, root)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	lease, err := holder.TryAcquire(ctx, "k")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lease.Release(context.Background()) })
	return ctx, lease, other
}
