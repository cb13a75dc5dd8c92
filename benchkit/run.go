package benchkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A workload is one measurement, run once per applicable subject per round.
type workload struct {
	// once marks a workload run in one round only: the flash sale, whose
	// wall time is set by its paused holders' TTLs (rounded up to a whole
	// second by etcd and to the session timeout by ZooKeeper) and which
	// demonstrates safety rather than measures speed.
	once    bool
	kind    string
	label   string
	waiters int
	// perSubject is false for the unlocked control, which runs once per round.
	perSubject bool
	// applies says whether s takes part.
	applies func(s *Subject) bool
	// units is how many progress steps one timed run makes.
	units int
	// run does one run; warm marks the untimed warm-up run.
	run func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error)
}

// workloads lists the runs c asks for, in order.
func (c *Config) workloads() []*workload {
	var ws []*workload
	isLocker := func(s *Subject) bool { return s.Locker != nil }
	if c.runs(KindFlashSale) {
		ws = append(ws, &workload{kind: KindFlashSale, label: "flash sale", perSubject: true, once: true, applies: isLocker, units: c.Buyers,
			run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
				if warm {
					return nil, nil
				}
				return flashSale(ctx, c, s, key, p)
			}})
	}
	if c.runs(KindFlashSaleUnlocked) {
		ws = append(ws, &workload{kind: KindFlashSaleUnlocked, label: "flash sale, no lock", once: true, units: c.Buyers,
			run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
				return flashSaleUnlocked(c, p), nil
			}})
	}
	all := func(*Subject) bool { return true }
	if c.runs(KindUncontended) {
		ws = append(ws, &workload{kind: KindUncontended, label: "uncontended acquire+release", perSubject: true, applies: all, units: c.Ops,
			run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
				n := c.Ops
				if warm {
					n, p = min(n, 20), nil
				}
				return uncontended(ctx, s, key, n, p)
			}})
	}
	if c.runs(KindHandoff) {
		for _, w := range c.Waiters {
			ws = append(ws, &workload{kind: KindHandoff, label: fmt.Sprintf("handoff, %d waiters", w), waiters: w, perSubject: true,
				applies: (*Subject).exclusive, units: c.Handoffs,
				run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
					n := c.Handoffs
					if warm {
						n, p = min(n, max(w, 10)), nil
					}
					return handoff(ctx, []Mutex{s.Mutex}, key, w, n, 0, p)
				}})
		}
	}
	if c.runs(KindManyKeys) {
		ws = append(ws, &workload{kind: KindManyKeys, label: fmt.Sprintf("many keys, %d workers, %d keys", c.ManyWorkers, c.ManyKeys),
			waiters: c.ManyWorkers, perSubject: true, applies: all, units: c.ManyOps,
			run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
				if warm {
					// Every key once: backends that make a key's row or
					// directory on its first use are measured warm.
					return manyKeys(ctx, s, key, c.ManyWorkers, c.ManyKeys, c.ManyKeys, nil, true)
				}
				return manyKeys(ctx, s, key, c.ManyWorkers, c.ManyKeys, c.ManyOps, p, false)
			}})
	}
	if c.runs(KindSemaphore) {
		ws = append(ws, &workload{kind: KindSemaphore,
			label:   fmt.Sprintf("semaphore, %d permits, %d contenders", c.Permits, c.SemContenders),
			waiters: c.SemContenders, perSubject: true, applies: isLocker, units: c.SemOps,
			run: func(ctx context.Context, s *Subject, key string, warm bool, p *Progress) (*Result, error) {
				n := c.SemOps
				if warm {
					n, p = c.SemContenders, nil // every contender's client connects
				}
				return semaphore(ctx, s.permitMutexes(c.Permits), key, c.Permits, c.SemContenders, n, sleeper(c.SemHold), p)
			}})
	}
	return ws
}

func (w *workload) rounds(c *Config) int {
	if w.once {
		return 1
	}
	return c.Rounds
}

// Run runs the workloads c asks for on the subjects: each workload Rounds
// times, every applicable subject once per round in the order given, after
// an untimed warm-up run per subject (unless c.NoWarmup). It returns the
// results, merged over rounds, in the order they print. A failed run does
// not stop the others: the errors are joined and returned with every result
// measured; only a cancelled ctx stops early.
func Run(ctx context.Context, c *Config, subjects []*Subject, p *Progress) ([]*Result, error) {
	ws := c.workloads()
	total := 0
	for _, w := range ws {
		n := w.units * w.rounds(c)
		if w.perSubject {
			n *= len(applicable(w, subjects))
		}
		total += n
	}
	p.start(total)
	defer p.finish()

	var out []*Result
	var failures []error
	for _, w := range ws {
		runs := []*Subject{nil}
		if w.perSubject {
			runs = applicable(w, subjects)
		}
		// Every subject gets keys of its own: subjects of one group share
		// a server, and a peer library's key could meet ours.
		key := func(i int) string {
			return fmt.Sprintf("%ss%d/%s-%d", c.Prefix, i, w.kind, w.waiters)
		}
		if !c.NoWarmup && w.perSubject {
			for i, s := range runs {
				p.label(w.label + " " + s.Name + " (warm-up)")
				if _, err := c.bounded(ctx, func(ctx context.Context) (*Result, error) { return w.run(ctx, s, key(i), true, nil) }); err != nil {
					// A warm-up failure is reported, not fatal: the timed
					// runs count their own errors.
					failures = append(failures, fmt.Errorf("%s on %s (warm-up): %w", w.label, s.Name, err))
					if ctx.Err() != nil {
						return out, errors.Join(failures...)
					}
				}
			}
		}
		merged := make([]*Result, len(runs))
		for range w.rounds(c) {
			for i, s := range runs {
				name := ""
				if s != nil {
					name = s.Name
				}
				p.label(strings.TrimSpace(w.label + " " + name))
				r, err := c.bounded(ctx, func(ctx context.Context) (*Result, error) { return w.run(ctx, s, key(i), false, p) })
				if r != nil {
					r.Workload, r.Kind, r.Subject = w.label, w.kind, s
					if w.kind == KindHandoff || w.kind == KindManyKeys || w.kind == KindSemaphore {
						r.Waiters = w.waiters
					}
					merged[i] = merged[i].merge(r)
				}
				if err != nil {
					// The result (if any) carries the error count; the
					// other subjects and workloads still run, unless the
					// run was stopped.
					failures = append(failures, fmt.Errorf("%s on %s: %w", w.label, name, err))
					if ctx.Err() != nil {
						return append(out, compact(merged)...), errors.Join(failures...)
					}
				}
			}
		}
		out = append(out, compact(merged)...)
	}
	return out, errors.Join(failures...)
}

func applicable(w *workload, subjects []*Subject) []*Subject {
	var out []*Subject
	for _, s := range subjects {
		if w.applies(s) {
			out = append(out, s)
		}
	}
	return out
}

func compact(rs []*Result) []*Result {
	return slices.DeleteFunc(slices.Clone(rs), func(r *Result) bool { return r == nil })
}

// bounded runs f, giving up after c.RunTimeout: its context is cancelled,
// and if f still does not return (a client that ignores contexts), bounded
// returns an error and leaves f's goroutines behind for the process's exit.
func (c *Config) bounded(ctx context.Context, f func(ctx context.Context) (*Result, error)) (*Result, error) {
	limit := c.RunTimeout
	if limit <= 0 {
		limit = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type outcome struct {
		r   *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := f(ctx)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-ctx.Done():
	}
	select {
	case o := <-done:
		return o.r, o.err
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("no result %v after the run's limit of %v: stuck in a client that ignores its context", 10*time.Second, limit)
	}
}
