package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
)

// uncontended times c.ops acquire+release pairs on one key from one
// goroutine: the cost of the lock when nobody else wants it.
func uncontended(ctx context.Context, c *benchConfig, t *target, p *progress) (*result, error) {
	key := t.key("uncontended")
	lat := make([]time.Duration, 0, c.ops)
	t0 := time.Now()
	for range c.ops {
		op := time.Now()
		lease, err := t.l.Acquire(ctx, key, locker.WithTTL(c.ttl))
		if err != nil {
			return nil, err
		}
		if err := lease.Release(ctx); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(op))
		p.add(1)
	}
	return &result{Workload: "uncontended acquire+release", Backend: t.url, Ops: c.ops, Elapsed: time.Since(t0), samples: lat}, nil
}

// handoff has c.waiters goroutines take turns on one key until c.ops
// handoffs have happened. Its latency is from the moment a holder starts to
// release to the moment the next holder's Acquire returns: what a waiter pays
// on top of the holder's own work, which native notification (no polling)
// keeps small.
func handoff(ctx context.Context, c *benchConfig, t *target, p *progress) (*result, error) {
	key := t.key("handoff")
	base := time.Now()
	var (
		remaining   atomic.Int64
		lastRelease atomic.Int64 // since base, in ns; 0 before the first release
		mu          sync.Mutex
		lat         = make([]time.Duration, 0, c.ops)
		errs        errorCount
		wg          sync.WaitGroup
	)
	remaining.Store(int64(c.ops))
	start := make(chan struct{})
	for range c.waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for {
				lease, err := t.l.Acquire(ctx, key, locker.WithTTL(c.ttl))
				if err != nil {
					errs.add(err)
					return
				}
				got := time.Since(base)
				n := remaining.Add(-1)
				if n >= 0 {
					if r := lastRelease.Load(); r > 0 {
						mine = append(mine, got-time.Duration(r))
					}
					lastRelease.Store(int64(time.Since(base)))
				}
				if err := lease.Release(ctx); err != nil {
					errs.add(err)
					return
				}
				if n < 0 {
					return // the run is over; this grant was not counted
				}
				p.add(1)
				if n == 0 {
					return
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	r := &result{Workload: fmt.Sprintf("handoff, %d waiters", c.waiters), Backend: t.url, Ops: c.ops - int(max(0, remaining.Load())), Elapsed: elapsed, samples: lat}
	errs.fill(r)
	if r.Errors > 0 && r.Ops < c.ops {
		return r, ctx.Err()
	}
	return r, nil
}
