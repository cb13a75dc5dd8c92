package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// Each benchmark runs the raw floor in the same run, beside the lock: two
// PING round trips per acquire+release on the same kind of connection. Ratios
// to the floor are what to compare across machines.

// BenchmarkUncontended: one client acquires and releases one key.
func BenchmarkUncontended(b *testing.B) {
	addr := testenv.Redis(b).Addr()
	ctx := context.Background()
	b.Run("floor=2xPING", func(b *testing.B) {
		c := direct(b, addr)
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t := time.Now()
			twoPings(ctx, c)
			lat = append(lat, time.Since(t))
		}
		reportP50(b, lat, "p50-µs")
	})
	b.Run("locker", func(b *testing.B) {
		l := newSingle(b, addr)
		key := "bench/" + testPrefix()
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t := time.Now()
			acquireRelease(b, ctx, l, key)
			lat = append(lat, time.Since(t))
		}
		reportP50(b, lat, "p50-µs")
	})
}

// BenchmarkContendedHandoff: 32 waiters on one key, spread over 1 or 32
// Lockers (clients); each takes the key, releases it at once, and waits
// again. handoff-p50-µs is from the start of a release to the moment the
// next holder has the lock.
func BenchmarkContendedHandoff(b *testing.B) {
	const waiters = 32
	addr := testenv.Redis(b).Addr()
	ctx := context.Background()
	b.Run("floor=PING", func(b *testing.B) {
		c := direct(b, addr)
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t := time.Now()
			c.Ping(ctx)
			lat = append(lat, time.Since(t))
		}
		reportP50(b, lat, "rtt-p50-µs")
	})
	for _, nl := range []int{1, waiters} {
		b.Run(fmt.Sprintf("locker/lockers=%d", nl), func(b *testing.B) { handoff(b, addr, nl, waiters) })
	}
}

func handoff(b *testing.B, addr string, nLockers, waiters int) {
	ctx := context.Background()
	{
		lockers := make([]locker.Locker, nLockers)
		for i := range lockers {
			lockers[i] = newSingle(b, addr)
		}
		key := "bench/" + testPrefix()
		var (
			released atomic.Int64 // UnixNano when the last release started; 0 for none
			left     atomic.Int64
			mu       sync.Mutex
			lat      []time.Duration
			wg       sync.WaitGroup
		)
		left.Store(int64(b.N))
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := range waiters {
			l := lockers[i%nLockers]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					lease, err := l.Acquire(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if r := released.Swap(0); r != 0 {
						mu.Lock()
						lat = append(lat, time.Since(time.Unix(0, r)))
						mu.Unlock()
					}
					released.Store(time.Now().UnixNano())
					if err := lease.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handoffs/s")
		reportP50(b, lat, "handoff-p50-µs")
	}
}

// BenchmarkManyKeys: 64 workers acquire and release random keys among 1,000.
func BenchmarkManyKeys(b *testing.B) {
	const workers, keys = 64, 1000
	addr := testenv.Redis(b).Addr()
	ctx := context.Background()
	run := func(b *testing.B, op func(k int) error) {
		var left atomic.Int64
		left.Store(int64(b.N))
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := op(rand.IntN(keys)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.Run("floor=2xPING", func(b *testing.B) {
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: workers})
		defer c.Close()
		run(b, func(int) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return err
			}
			return c.Ping(ctx).Err()
		})
	})
	b.Run("locker", func(b *testing.B) {
		l := newSingleClient(b, goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: workers, ContextTimeoutEnabled: true}))
		prefix := "bench/" + testPrefix()
		run(b, func(k int) error {
			lease, err := l.Acquire(ctx, fmt.Sprintf("%s%d", prefix, k))
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		})
	})
}

// twoPings is the floor of one uncontended acquire+release: two round trips.
func twoPings(ctx context.Context, c *goredis.Client) {
	c.Ping(ctx)
	c.Ping(ctx)
}

// acquireRelease is one uncontended acquire+release of key.
func acquireRelease(b *testing.B, ctx context.Context, l locker.Locker, key string) {
	lease, err := l.TryAcquire(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		b.Fatal(err)
	}
}

func reportP50(b *testing.B, lat []time.Duration, unit string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, unit)
}

// BenchmarkUncontendedInterleaved runs the floor (two PINGs) and an
// uncontended acquire+release in turn within every iteration, so that both
// see the same server and machine load (on a shared machine, the noise
// between two sub-benchmarks run one after the other swamps a difference of
// a few per cent), and reports both p50s, both means and their ratios.
func BenchmarkUncontendedInterleaved(b *testing.B) {
	addr := testenv.Redis(b).Addr()
	ctx := context.Background()
	c := direct(b, addr)
	l := newSingle(b, addr)
	key := "bench/" + testPrefix()
	floor := make([]time.Duration, 0, b.N)
	lock := make([]time.Duration, 0, b.N)
	pings := func() time.Duration {
		t := time.Now()
		twoPings(ctx, c)
		return time.Since(t)
	}
	pair := func() time.Duration {
		t := time.Now()
		acquireRelease(b, ctx, l, key)
		return time.Since(t)
	}
	// The two take turns at going first, so that neither always runs right
	// after the other.
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			floor = append(floor, pings())
			lock = append(lock, pair())
		} else {
			lock = append(lock, pair())
			floor = append(floor, pings())
		}
	}
	var fs, ls time.Duration
	for i := range floor {
		fs, ls = fs+floor[i], ls+lock[i]
	}
	b.ReportMetric(float64(ls)/float64(fs), "locker/floor-mean")
	slices.Sort(floor)
	slices.Sort(lock)
	fp, lp := floor[len(floor)/2], lock[len(lock)/2]
	b.ReportMetric(float64(fp.Nanoseconds())/1e3, "floor-p50-µs")
	b.ReportMetric(float64(lp.Nanoseconds())/1e3, "locker-p50-µs")
	b.ReportMetric(float64(lp)/float64(fp), "locker/floor-p50")
}
