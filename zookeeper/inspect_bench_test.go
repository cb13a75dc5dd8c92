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
			root := freshRoot(b)
			holder, other := dial(b, servers, root, locker.WithOwner("holder")), dial(b, servers, root)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lease, err := holder.TryAcquire(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = lease.Release(context.Background()) }()
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
	servers := []string{testenv.ZooKeeper(b).Addr()}
	root := freshRoot(b)
	holder, watcher := dial(b, servers, root), dial(b, servers, root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease, err := holder.TryAcquire(ctx, "k")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
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
