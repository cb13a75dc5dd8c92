package locker_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/memory"
)

// holdMany acquires n auto-refreshed leases on distinct keys of a fresh
// memory Locker; the Locker is closed at the end of the test.
func holdMany(tb testing.TB, n int, ttl time.Duration) (locker.Locker, []locker.Lease) {
	tb.Helper()
	l, err := memory.New(memory.NewStore(), locker.WithTTL(ttl), locker.WithAutoRefresh(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	ctx := context.Background()
	leases := make([]locker.Lease, n)
	for i := range leases {
		if leases[i], err = l.TryAcquire(ctx, fmt.Sprintf("held/%d", i)); err != nil {
			tb.Fatal(err)
		}
	}
	return l, leases
}

// A held auto-refreshed lease costs no goroutine of its own: a process may
// hold many locks (one per tenant, per shard) and each refresh is a timer.
func TestHeldLeases_NoGoroutineEach(t *testing.T) {
	const n = 1000
	before := runtime.NumGoroutine()
	// A long TTL: no refresh is due while the goroutines are counted, so
	// none is running then; a tenth of n leaves room for the runtime's own.
	l, leases := holdMany(t, n, time.Minute)
	if added := runtime.NumGoroutine() - before; added >= n/10 {
		t.Fatalf("holding %d auto-refreshed leases added %d goroutines, want none per lease", n, added)
	}
	ctx := context.Background()
	for _, lease := range leases[:n/2] {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, lease := range leases {
		select {
		case <-lease.Done():
		default:
			t.Fatalf("lease %s still held after Close", lease.Key())
		}
	}
}

// BenchmarkHeldLeases reports what holding one auto-refreshed lease costs the
// process at n = 10,000 on memory: heap and goroutine stack bytes (the
// memory Store's entry included, as a server client's state would be) and
// goroutines, per lease.
func BenchmarkHeldLeases(b *testing.B) {
	const n = 10000
	var bytes, goroutines float64
	for b.Loop() {
		before, g := inUse(), runtime.NumGoroutine()
		l, leases := holdMany(b, n, time.Minute)
		after, g2 := inUse(), runtime.NumGoroutine()
		runtime.KeepAlive(leases)
		bytes += float64(after-before) / n
		goroutines += float64(g2-g) / n
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(bytes/float64(b.N), "B/lease")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/lease")
}

// inUse returns the bytes of heap and goroutine stacks in use after a GC.
func inUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
