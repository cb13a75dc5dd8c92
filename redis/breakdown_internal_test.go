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
	must := mustFor(b)
	steps := []step{
		{"floor", func() { must(c.Ping(ctx).Err()); must(c.Ping(ctx).Err()) }},
		{"eval", func() {
			must(noopScript.Run(ctx, c, keys, args...).Err())
			must(noopScript.Run(ctx, c, qk[:], val, be.wakeArg).Err())
		}},
		{"scripts", func() {
			must(acquireScript.Run(ctx, c, keys, args...).Err())
			must(releaseScript.Run(ctx, c, qk[:], val, be.wakeArg).Err())
		}},
	}
	breakdown(b, append(steps, layerSteps(ctx, must, be, req, l, "bench/breakdown/locker")...))
}

// BenchmarkRedlockUncontendedBreakdown is BenchmarkUncontendedBreakdown
// over five masters: the floor is two PINGs to every master at once, and
// the layers are two no-op EVALSHAs to every master at once, our grant and
// release scripts so, the driver and the Locker. Every step reaches the
// masters through the backend's onAll (a goroutine and a per-node timeout
// each), so the differences are the scripts' and the layers' own.
func BenchmarkRedlockUncontendedBreakdown(b *testing.B) {
	addrs := testenv.RedisMasters(b, 5).Addrs()
	clients := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
		b.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	ctx := context.Background()
	r, err := newRedlock(clients, config{Prefix: DefaultPrefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	l, err := NewRedlock(clients)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })

	req := &driver.Request{Key: "bench/redlock-breakdown/driver", Owner: driver.NewOwnerID(), Label: "bench", TTL: locker.DefaultTTL}
	n := r.names(req.Key)
	val := value(req)
	timeout := r.timeout(req.TTL)
	grantKeys := []string{n.lock, n.fence}
	qk := n.queueKeys()
	must := mustFor(b)
	// onAll runs one call on every master at once and fails the benchmark
	// on any error.
	onAll := func(call func(ctx context.Context, c goredis.UniversalClient) error) {
		errs := make([]error, len(clients))
		r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) { errs[i] = call(ctx, c) })
		for _, err := range errs {
			must(err)
		}
	}
	steps := []step{
		{"floor", func() {
			for range 2 {
				onAll(func(ctx context.Context, c goredis.UniversalClient) error { return c.Ping(ctx).Err() })
			}
		}},
		{"eval", func() {
			hint := time.Now().Add(hintMargin).UnixMicro()
			onAll(func(ctx context.Context, c goredis.UniversalClient) error {
				return noopScript.Run(ctx, c, grantKeys, val, serverTTL(req), req.Value, hint).Err()
			})
			onAll(func(ctx context.Context, c goredis.UniversalClient) error {
				return noopScript.Run(ctx, c, qk[:], val, r.wakeArg).Err()
			})
		}},
		{"scripts", func() {
			hint := time.Now().Add(hintMargin).UnixMicro()
			onAll(func(ctx context.Context, c goredis.UniversalClient) error {
				return grantScript.Run(ctx, c, grantKeys, val, serverTTL(req), req.Value, hint).Err()
			})
			onAll(func(ctx context.Context, c goredis.UniversalClient) error {
				return releaseScript.Run(ctx, c, qk[:], val, r.wakeArg).Err()
			})
		}},
	}
	breakdown(b, append(steps, layerSteps(ctx, must, r, req, l, "bench/redlock-breakdown/locker")...))
}

// step is one way of doing an uncontended acquire+release, or the floor.
type step struct {
	name string
	run  func()
}

var noopScript = goredis.NewScript("return 1")

// layerSteps are a breakdown's last two steps: an acquire+release of req
// through the backend (the driver) and of key through the Locker.
func layerSteps(ctx context.Context, must func(error), be driver.Backend, req *driver.Request, l locker.Locker, key string) []step {
	return []step{
		{"driver", func() {
			dl, err := be.TryAcquire(ctx, req)
			must(err)
			must(dl.Release(ctx))
		}},
		{"locker", func() {
			lease, err := l.TryAcquire(ctx, key)
			must(err)
			must(lease.Release(ctx))
		}},
	}
}

func mustFor(b *testing.B) func(error) {
	return func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// breakdown runs the steps in turn in every iteration, starting with a
// different one each time, and reports each step's median per-iteration
// difference to the first (the floor) and the floor's median: paired, so
// the machine's drift between iterations cancels out.
func breakdown(b *testing.B, steps []step) {
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
