package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/distlock/locker"
)

// benchConfig holds the sizes of a bench run, from its flags.
type benchConfig struct {
	backends  []string
	buyers    int
	stock     int
	pauses    int
	pauseTTL  time.Duration
	ops       int
	waiters   int
	ttl       time.Duration
	rounds    int
	workloads []string
}

// A workload is one measurement. Workloads that use a lock run once per
// backend per round, interleaved across backends; the others (the unlocked
// control) run once per round. New workloads (many keys, the raw floor of a
// backend) are new entries in benchWorkloads.
type workload struct {
	name string // as given to --workloads
	// perBackend is false for a workload that uses no lock.
	perBackend bool
	// units is how many progress steps one run makes.
	units func(c *benchConfig) int
	run   func(ctx context.Context, c *benchConfig, t *target, p *progress) (*result, error)
}

// benchWorkloads lists every workload in the order they run and print.
var benchWorkloads = []*workload{
	{name: "flash-sale", perBackend: true, units: func(c *benchConfig) int { return c.buyers }, run: flashSale},
	{name: "flash-sale-unlocked", units: func(c *benchConfig) int { return c.buyers }, run: flashSaleUnlocked},
	{name: "uncontended", perBackend: true, units: func(c *benchConfig) int { return c.ops }, run: uncontended},
	{name: "handoff", perBackend: true, units: func(c *benchConfig) int { return c.ops }, run: handoff},
}

func workloadNames() []string {
	names := make([]string, len(benchWorkloads))
	for i, w := range benchWorkloads {
		names[i] = w.name
	}
	return names
}

// A target is one backend under test.
type target struct {
	url string
	l   locker.Locker
	// prefix keeps this run's keys apart from any other run's on a shared
	// server, and from what an earlier, interrupted run left behind.
	prefix string
}

func (t *target) key(name string) string { return t.prefix + name }

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// bench implements "lockctl bench".
func (a *app) bench(ctx context.Context, args []string) int {
	c := &benchConfig{}
	fset := flag.NewFlagSet("bench", flag.ContinueOnError)
	fset.SetOutput(a.stderr)
	var backends stringList
	fset.Var(&backends, "backend", "backend URL to measure; repeat to compare backends side by side (default memory://)")
	fset.IntVar(&c.buyers, "buyers", 10000, "flash sale: concurrent buyers")
	fset.IntVar(&c.stock, "stock", 100, "flash sale: units in stock")
	fset.IntVar(&c.pauses, "pauses", 3, "flash sale: holders that stall past their TTL, as in a GC pause, then try to write")
	fset.DurationVar(&c.pauseTTL, "pause-ttl", 100*time.Millisecond, "flash sale: lease TTL of the stalling holders")
	fset.IntVar(&c.ops, "ops", 5000, "uncontended: acquire+release pairs; handoff: handoffs")
	fset.IntVar(&c.waiters, "waiters", 32, "handoff: goroutines contending for one key")
	fset.DurationVar(&c.ttl, "ttl", locker.DefaultTTL, "lease TTL of every other acquisition")
	fset.IntVar(&c.rounds, "rounds", 1, "run every workload this many times, interleaving backends (A B A B …); results are totals")
	only := fset.String("workloads", strings.Join(workloadNames(), ","), "comma-separated workloads to run")
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: lockctl bench [--backend URL]... [flags]

Measures lock backends side by side: a flash sale with and without the lock
(units sold, oversold, stale writes refused by the fencing guard), uncontended
acquire+release, and handoff between many waiters on one key.

Flags:
`)
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fset.NArg() > 0 {
		return a.failf(exitUsage, "bench: unexpected argument %q (backends are given with --backend URL)", fset.Arg(0))
	}
	c.backends = backends
	if len(c.backends) == 0 {
		c.backends = []string{"memory://"}
	}
	c.workloads = strings.Split(*only, ",")
	if err := c.validate(); err != nil {
		return a.failf(exitUsage, "bench: %v", err)
	}

	ctx, stop := a.cancelOnSignal(ctx)
	defer stop()
	targets, err := a.openTargets(ctx, c)
	defer func() {
		for _, t := range targets {
			_ = t.l.Close()
		}
	}()
	if err != nil {
		return a.failf(lockStatus(err), "bench: %v", err)
	}

	results, err := runBench(ctx, c, targets, newProgress(a.stderr, a.stderrIsTerminal))
	if len(results) > 0 {
		fmt.Fprintln(a.stdout, c.header())
		fmt.Fprintln(a.stdout)
		writeTable(a.stdout, results)
	}
	if err != nil {
		if sig := stop(); sig != nil {
			return a.failf(signalStatus(sig), "bench: interrupted by %v", sig)
		}
		return a.failf(exitUnavailable, "bench: %v", err)
	}
	fmt.Fprintln(a.stdout)
	if ok := writeVerdicts(a.stdout, results); !ok {
		return exitFailed
	}
	return exitOK
}

func (c *benchConfig) validate() error {
	for _, v := range []struct {
		name string
		n    int
		min  int
	}{{"buyers", c.buyers, 1}, {"stock", c.stock, 0}, {"pauses", c.pauses, 0}, {"ops", c.ops, 1}, {"waiters", c.waiters, 1}, {"rounds", c.rounds, 1}} {
		if v.n < v.min {
			return fmt.Errorf("--%s %d: want at least %d", v.name, v.n, v.min)
		}
	}
	if c.ttl <= 0 || c.pauseTTL <= 0 {
		return errors.New("--ttl and --pause-ttl must be positive")
	}
	for _, name := range c.workloads {
		if !slices.Contains(workloadNames(), name) {
			return fmt.Errorf("--workloads: unknown workload %q (have %s)", name, strings.Join(workloadNames(), ", "))
		}
	}
	return nil
}

// header describes the run, so that a pasted table says what it measured.
func (c *benchConfig) header() string {
	s := fmt.Sprintf("lockctl bench: flash sale %d buyers, %d units, %d paused holders; %d ops; %d waiters; TTL %v; GOMAXPROCS %d",
		c.buyers, c.stock, c.pauses, c.ops, c.waiters, c.ttl, runtime.GOMAXPROCS(0))
	if c.rounds > 1 {
		s += fmt.Sprintf("; totals over %d rounds", c.rounds)
	}
	return s
}

// openTargets opens every backend; on error it returns those it opened, for
// the caller to close.
func (a *app) openTargets(ctx context.Context, c *benchConfig) ([]*target, error) {
	var run [8]byte
	_, _ = rand.Read(run[:])
	prefix := "lockctl-bench/" + hex.EncodeToString(run[:]) + "/"
	var targets []*target
	for _, u := range c.backends {
		l, err := a.open(ctx, u, locker.WithOwner("lockctl bench"))
		if err != nil {
			return targets, err
		}
		targets = append(targets, &target{url: u, l: l, prefix: prefix})
	}
	return targets, nil
}

// runBench runs the selected workloads, each across all targets before the
// next, and returns the results in the order they should print. On error it
// returns what it measured so far.
func runBench(ctx context.Context, c *benchConfig, targets []*target, p *progress) ([]*result, error) {
	var selected []*workload
	total := 0
	for _, w := range benchWorkloads {
		if !slices.Contains(c.workloads, w.name) {
			continue
		}
		selected = append(selected, w)
		n := w.units(c) * c.rounds
		if w.perBackend {
			n *= len(targets)
		}
		total += n
	}
	p.start(total)
	defer p.finish()

	var results []*result
	for _, w := range selected {
		runs := targets
		if !w.perBackend {
			runs = []*target{{url: ""}}
		}
		merged := make([]*result, len(runs))
		for range c.rounds {
			for i, t := range runs {
				p.label(strings.TrimSpace(w.name + " " + t.url))
				r, err := w.run(ctx, c, t, p)
				if err != nil {
					return append(results, compact(merged)...), fmt.Errorf("%s on %s: %w", w.name, t.url, err)
				}
				merged[i] = merged[i].merge(r)
			}
		}
		results = append(results, merged...)
	}
	return results, nil
}

func compact(rs []*result) []*result {
	return slices.DeleteFunc(slices.Clone(rs), func(r *result) bool { return r == nil })
}
