package redis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// BenchmarkUncontendedBreakdown says where an uncontended acquire+release
// spends its time beyond the floor's two PINGs. Every iteration runs, in
// turn and starting with a different one each time, the floor and four
// steps that each add one layer: two EVALSHAs of a script that only returns
// (with our keys and arguments), our two scripts called directly, the
// driver (the backend without the portable layer), and the Locker. All go
// over one client. Each step's metric is the median over iterations of its
// time minus the floor's in the same iteration: paired, so the machine's
// drift between iterations cancels out.
func BenchmarkUncontendedBreakdown(b *testing.B) {
	addr := testenv.Redis(b).Addr()
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	be, err := newBackend(c, config{Prefix: DefaultPrefix})
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })

	req := &driver.Request{Key: "bench/breakdown/driver", Owner: driver.NewOwnerID(), Label: "bench", TTL: locker.DefaultTTL}
	n := be.names(req.Key)
	val := value(req)
	keys, args := be.acquireArgs(n, req, val, "")
	qk := n.queueKeys()
	noop := goredis.NewScript("return 1")
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"floor", func() { must(c.Ping(ctx).Err()); must(c.Ping(ctx).Err()) }},
		{"eval", func() {
			must(noop.Run(ctx, c, keys, args...).Err())
			must(noop.Run(ctx, c, qk[:], val, be.wakeArg).Err())
		}},
		{"scripts", func() {
			must(acquireScript.Run(ctx, c, keys, args...).Err())
			must(releaseScript.Run(ctx, c, qk[:], val, be.wakeArg).Err())
		}},
		{"driver", func() {
			dl, err := be.TryAcquire(ctx, req)
			must(err)
			must(dl.Release(ctx))
		}},
		{"locker", func() {
			lease, err := l.TryAcquire(ctx, "bench/breakdown/locker")
			must(err)
			must(lease.Release(ctx))
		}},
	}
	lat := make([][]time.Duration, len(steps))
	for i := 0; b.Loop(); i++ {
		for j := range steps {
			k := (i + j) % len(steps)
			t := time.Now()
			steps[k].run()
			lat[k] = append(lat[k], time.Since(t))
		}
	}
	floor := lat[0]
	for k, s := range steps[1:] {
		d := make([]time.Duration, len(floor))
		for i := range floor {
			d[i] = lat[k+1][i] - floor[i]
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, s.name+"-Δµs")
	}
	slices.Sort(floor)
	b.ReportMetric(float64(floor[len(floor)/2].Nanoseconds())/1e3, "floor-p50-µs")
}
