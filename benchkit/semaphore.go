package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
)

// The semaphore workload: contenders goroutines, spread over the subject's
// Lockers, take permits of one key that admits n holders at once
// (locker.WithLimit(n)), hold each briefly and release it, until ops
// permits have been granted. Its latency is the wait, from the call to the
// grant; its throughput is permits granted per second.
//
// A counter of holders checks the limit: raised after each grant returns,
// lowered before its release is sent, so that it counts a holder only
// within the hold the backend granted. A count above n is a breach.

// semaphore runs the workload over ms, one Mutex per Locker, each acquiring
// a permit of key; contender i uses ms[i % len(ms)]. hold is the holder's
// work between grant and release. A first, untimed acquisition finds out
// whether the backend has permits at all: if it refuses them with
// locker.ErrUnsupported the result says so and the run is not a failure.
func semaphore(ctx context.Context, ms []Mutex, key string, n, contenders, ops int, hold func(), p *Progress) (*Result, error) {
	release, err := ms[0].Lock(ctx, key)
	if errors.Is(err, locker.ErrUnsupported) {
		return &Result{Permits: n, Unsupported: err.Error()}, nil
	}
	if err == nil {
		err = release(ctx)
	}
	if err != nil {
		return nil, err
	}
	var (
		remaining   atomic.Int64
		holders     atomic.Int64
		peak        atomic.Int64
		over        atomic.Int64
		lat         = latencies{all: make([]time.Duration, 0, ops)}
		errs        errorCount
		wg          sync.WaitGroup
		start       = make(chan struct{})
		raisePeakTo = func(h int64) {
			for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
			}
		}
	)
	remaining.Store(int64(ops))
	for i := range contenders {
		m := ms[i%len(ms)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var mine []time.Duration
			defer lat.add(&mine)
			for remaining.Add(-1) >= 0 {
				t0 := time.Now()
				release, err := m.Lock(ctx, key)
				if err != nil {
					errs.add(err)
					return
				}
				mine = append(mine, time.Since(t0))
				h := holders.Add(1)
				raisePeakTo(h)
				if h > int64(n) {
					over.Add(1)
				}
				hold()
				holders.Add(-1)
				if err := release(ctx); err != nil {
					errs.add(err)
					return
				}
				p.add(1)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	r := &Result{Permits: n, Peak: int(peak.Load()), OverLimit: int(over.Load()), Ops: len(lat.all), Elapsed: time.Since(t0), samples: lat.all}
	errs.fill(r)
	if r.Errors > 0 {
		return r, fmt.Errorf("%d of %d permits granted; first error: %s", r.Ops, ops, r.FirstError)
	}
	return r, nil
}

// permitMutexes makes one Mutex per Locker of s, each acquiring a permit of
// an n-permit key with the subject's own options.
func (s *Subject) permitMutexes(n int) []Mutex {
	opts := append(append([]locker.Option(nil), s.opts...), locker.WithLimit(n))
	ms := []Mutex{LockerMutex(s.Locker, opts...)}
	for _, l := range s.Others {
		ms = append(ms, LockerMutex(l, opts...))
	}
	return ms
}

// sleeper returns a hold of d.
func sleeper(d time.Duration) func() {
	return func() {
		if d > 0 {
			time.Sleep(d)
		}
	}
}
