package locker

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker/driver"
)

// BenchmarkPortableLayer measures what the portable layer itself costs per
// acquire+release: the backend is a stub that grants at once, so the time
// and allocations are the root's alone (the Redis uncontended analysis in
// docs/benchmarks.md compares it with the layer's cost beside a server).
func BenchmarkPortableLayer(b *testing.B) {
	s := &stub{acquire: func(context.Context, *driver.Request) (driver.Lock, error) {
		return &stubLock{start: time.Now()}, nil
	}}
	l, err := New(s)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		lease, err := l.TryAcquire(ctx, "bench/key")
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
