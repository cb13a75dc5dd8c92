package etcd_test

import (
	"context"
	"iter"
	"strconv"
	"testing"

	"github.com/distlock/locker"
)

// BenchmarkInspect is one locker.Inspect of a held lock: the range read
// and the lease's time left.
func BenchmarkInspect(b *testing.B) {
	e := newBenchEnv(b)
	l := e.locker(b)
	ctx := context.Background()
	if _, err := l.TryAcquire(ctx, "k"); err != nil {
		b.Fatalf("TryAcquire: %v", err)
	}
	for b.Loop() {
		if info, err := locker.Inspect(ctx, l, "k"); err != nil || !info.Held {
			b.Fatalf("Inspect = %+v, %v", info, err)
		}
	}
}

// BenchmarkList lists 1,000 locks held by one Locker; ns/op is per lock.
func BenchmarkList(b *testing.B) {
	e := newBenchEnv(b)
	l := e.locker(b)
	ctx := context.Background()
	const locks = 1000
	for i := range locks {
		if _, err := l.TryAcquire(ctx, "k"+strconv.Itoa(i)); err != nil {
			b.Fatalf("TryAcquire: %v", err)
		}
	}
	n := 0
	for b.Loop() {
		for _, err := range locker.List(ctx, l, "") {
			if err != nil {
				b.Fatalf("List: %v", err)
			}
			n++
		}
	}
	if n != locks*b.N {
		b.Fatalf("List yielded %d locks in %d rounds, want %d each", n, b.N, locks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/lock")
}

// BenchmarkWatch is one Publish and the watcher's locker.Watch yielding it:
// the txn, the watch event and the watcher's Inspect.
func BenchmarkWatch(b *testing.B) {
	e := newBenchEnv(b)
	l := e.locker(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		b.Fatalf("TryAcquire: %v", err)
	}
	next, stop := iter.Pull2(locker.Watch(ctx, l, "k"))
	defer stop()
	next()
	i := 0
	for b.Loop() {
		i++
		v := strconv.Itoa(i)
		if err := locker.Publish(ctx, lease, v); err != nil {
			b.Fatalf("Publish: %v", err)
		}
		for {
			info, err, ok := next()
			if !ok || err != nil {
				b.Fatalf("Watch ended: %v", err)
			}
			if info.Value == v {
				break
			}
		}
	}
}
