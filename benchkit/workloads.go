package benchkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// errorCount counts failed operations and keeps the first.
type errorCount struct {
	n     atomic.Int64
	once  sync.Once
	first error
}

func (e *errorCount) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err })
}

func (e *errorCount) fill(r *Result) {
	r.Errors = int(e.n.Load())
	if r.Errors > 0 {
		r.FirstError = e.first.Error()
	}
}

// latencies gathers the samples of many goroutines, each adding its own
// when it ends.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(mine *[]time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, *mine...)
}

// uncontended times n lock+release pairs on one key from one goroutine: the
// cost of the lock when nobody else wants it.
func uncontended(ctx context.Context, s *Subject, key string, n int, p *Progress) (*Result, error) {
	lat := make([]time.Duration, 0, n)
	t0 := time.Now()
	for range n {
		op := time.Now()
		release, err := s.Mutex.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		if err := release(ctx); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(op))
		p.add(1)
	}
	return &Result{Ops: n, Elapsed: time.Since(t0), samples: lat}, nil
}

// handoff has w goroutines take turns on one key until n handoffs have
// happened. Its latency is from the moment a holder starts to release to the
// moment the next holder's Lock returns: what a waiter pays on top of the
// holder's own work, which native notification (no polling) keeps small.
//
// Only a grant to another waiter than the last holder counts as a handoff
// (with one waiter, every grant does): a library that lets the releasing
// goroutine take the lock straight back while the others sleep between
// polls does not hand off, and its time doing so is part of the run's wall
// time.
//
// Every waiter loops until it has been granted the lock once after the n-th
// grant: nobody is cancelled, so libraries without context support stop as
// cleanly as the others. The time of those last grants is not counted: the
// run's elapsed time ends at the n-th grant.
//
// Waiter i locks through ms[i % len(ms)]: one Mutex, or one per Locker.
//
// The first settle grants are not counted, nor is their time: while w
// waiters arrive at once, the first grants measure how a backend absorbs
// that burst of Acquires, not what a handoff costs. Once w grants are made
// on a FIFO lock, every waiter has been served once and queued again.
func handoff(ctx context.Context, ms []Mutex, key string, w, n, settle int, p *Progress) (*Result, error) {
	base := time.Now()
	var (
		settling    atomic.Int64 // grants still to make before counting
		counting    atomic.Int64 // since base, in ns: when settling ended
		remaining   atomic.Int64
		grants      atomic.Int64
		lastRelease atomic.Int64 // since base, in ns; 0 before the first release
		lastHolder  atomic.Int64 // the waiter that held last; -1 before the first grant
		end         atomic.Int64 // since base, in ns: the n-th grant
		lat         = latencies{all: make([]time.Duration, 0, n)}
		errs        errorCount
		wg          sync.WaitGroup
	)
	remaining.Store(int64(n))
	settling.Store(int64(settle))
	lastHolder.Store(-1)
	start := make(chan struct{})
	for me := range w {
		m := ms[me%len(ms)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var mine []time.Duration
			defer lat.add(&mine)
			for {
				release, err := m.Lock(ctx, key)
				if err != nil {
					errs.add(err)
					return
				}
				got := time.Since(base)
				grants.Add(1)
				// Only the holder touches lastHolder, remaining and
				// settling, so these steps need no lock of their own.
				handed := w == 1 || lastHolder.Swap(int64(me)) != int64(me)
				if settling.Load() > 0 {
					if settling.Add(-1) == 0 {
						counting.Store(int64(time.Since(base)))
					}
					lastRelease.Store(int64(time.Since(base)))
					if err := release(ctx); err != nil {
						errs.add(err)
						return
					}
					continue
				}
				left := int64(0)
				if handed {
					left = remaining.Add(-1)
				} else if remaining.Load() <= 0 {
					left = -1
				}
				if handed && left >= 0 {
					if r := lastRelease.Load(); r > 0 {
						mine = append(mine, got-time.Duration(r))
					}
					if left == 0 {
						end.Store(int64(got))
					}
				}
				if left >= 0 {
					lastRelease.Store(int64(time.Since(base)))
				}
				if err := release(ctx); err != nil {
					errs.add(err)
					return
				}
				if left < 0 {
					return // the run is over; this grant was not counted
				}
				if handed {
					p.add(1)
				}
			}
		}()
	}
	t0 := time.Since(base)
	close(start)
	wg.Wait()
	if settle > 0 {
		t0 = time.Duration(counting.Load())
	}
	stop := time.Duration(end.Load())
	if stop == 0 {
		stop = time.Since(base)
	}
	r := &Result{Ops: n - int(max(0, remaining.Load())), Elapsed: stop - t0, samples: lat.all, grants: int(grants.Load())}
	errs.fill(r)
	if r.Errors > 0 && r.Ops < n {
		return r, fmt.Errorf("%d of %d handoffs done; first error: %s", r.Ops, n, r.FirstError)
	}
	return r, nil
}

// manyKeys has workers goroutines lock and release keys picked at random
// among keys, n pairs in all: throughput when locks rarely meet. With
// inOrder the keys are taken in turn instead (the warm-up: every key once).
func manyKeys(ctx context.Context, s *Subject, prefix string, workers, keys, n int, p *Progress, inOrder bool) (*Result, error) {
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%d", prefix, i)
	}
	var (
		remaining atomic.Int64
		lat       = latencies{all: make([]time.Duration, 0, n)}
		errs      errorCount
		wg        sync.WaitGroup
	)
	remaining.Store(int64(n))
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer lat.add(&mine)
			for {
				i := remaining.Add(-1)
				if i < 0 {
					return
				}
				k := rand.IntN(keys)
				if inOrder {
					k = int(i) % keys
				}
				d, err := timedPair(ctx, s.Mutex, names[k])
				if err != nil {
					errs.add(err)
					return
				}
				mine = append(mine, d)
				p.add(1)
			}
		}()
	}
	wg.Wait()
	return pairsResult(&lat, &errs, t0, n)
}

// timedPair acquires and releases key through m and returns how long the
// pair took.
func timedPair(ctx context.Context, m Mutex, key string) (time.Duration, error) {
	op := time.Now()
	release, err := m.Lock(ctx, key)
	if err == nil {
		err = release(ctx)
	}
	return time.Since(op), err
}

// pairsResult is the result of a run of want pairs started at t0.
func pairsResult(lat *latencies, errs *errorCount, t0 time.Time, want int) (*Result, error) {
	r := &Result{Ops: len(lat.all), Elapsed: time.Since(t0), samples: lat.all}
	errs.fill(r)
	if r.Errors > 0 {
		return r, fmt.Errorf("%d of %d operations failed; first error: %s", r.Errors, want, r.FirstError)
	}
	return r, nil
}
