package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/benchkit/floor"
	"github.com/distlock/locker/benchkit/servers"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// intList is a comma-separated list of integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// benchOptions are the flags of bench beyond the workload sizes.
type benchOptions struct {
	backends []benchBackend
	servers  bool
	out      string
	floors   bool
	quick    bool
}

// bench implements "lockctl bench".
func (a *app) bench(ctx context.Context, args []string) int {
	c := benchkit.NewConfig()
	sc := benchkit.NewScaleConfig()
	var o benchOptions
	fset := flag.NewFlagSet("bench", flag.ContinueOnError)
	fset.SetOutput(a.stderr)
	var backends stringList
	waiters := intList(c.Waiters)
	fset.Var(&backends, "backend", "backend URL to measure; repeat to compare backends side by side (default memory://, or the --servers)")
	fset.BoolVar(&o.servers, "servers", false, "start Redis, 5 Redis masters for Redlock, etcd, ZooKeeper and PostgreSQL in Docker (from the images of scripts/test-images), bench them, remove them")
	fset.StringVar(&o.out, "out", "", "write report.md, results.json and charts (SVG and PNG) into this directory")
	fset.BoolVar(&o.floors, "floor", true, "measure each backend's raw floor (the bare round trips of its protocol) beside it")
	fset.BoolVar(&o.quick, "quick", false, "tiny sizes and one round: a smoke test of seconds, not a measurement")
	fset.IntVar(&c.Buyers, "buyers", c.Buyers, "flash sale: concurrent buyers")
	fset.IntVar(&c.Stock, "stock", c.Stock, "flash sale: units in stock")
	fset.IntVar(&c.Pauses, "pauses", c.Pauses, "flash sale: holders that stall past their TTL, as in a GC pause, then try to write")
	fset.DurationVar(&c.PauseTTL, "pause-ttl", c.PauseTTL, "flash sale: lease TTL of the stalling holders")
	fset.IntVar(&c.Ops, "ops", c.Ops, "uncontended: acquire+release pairs per round")
	fset.Var(&waiters, "waiters", "handoff: comma-separated numbers of goroutines contending for one key")
	fset.IntVar(&c.Handoffs, "handoffs", c.Handoffs, "handoff: handoffs per round and number of waiters")
	fset.IntVar(&c.ManyWorkers, "many-workers", c.ManyWorkers, "many keys: concurrent workers")
	fset.IntVar(&c.ManyKeys, "many-keys", c.ManyKeys, "many keys: keys the workers pick from at random")
	fset.IntVar(&c.ManyOps, "many-ops", c.ManyOps, "many keys: acquire+release pairs per round")
	fset.IntVar(&c.Permits, "permits", c.Permits, "semaphore: permits of the key (locker.WithLimit)")
	fset.IntVar(&c.SemContenders, "sem-contenders", c.SemContenders, "semaphore: goroutines contending for the permits")
	fset.IntVar(&c.SemLockers, "sem-lockers", c.SemLockers, "semaphore: Lockers (each with its own clients) the contenders are spread over")
	fset.IntVar(&c.SemOps, "sem-ops", c.SemOps, "semaphore: permits granted per round")
	fset.DurationVar(&c.SemHold, "sem-hold", c.SemHold, "semaphore: how long each holder keeps its permit")
	fset.DurationVar(&c.TTL, "ttl", c.TTL, "lease TTL of every other acquisition")
	fset.IntVar(&c.Rounds, "rounds", c.Rounds, "timed runs of every workload per backend, interleaving backends (A B A B …); results are totals")
	failover := fset.Int("failover", 0, "instead of the workloads: this many trials per backend of an election's failover — the leader's lockctl elect process killed (SIGKILL), the time until the standby's command runs")
	failoverTTL := fset.Duration("failover-ttl", 2*time.Second, "with --failover: the election's TTL")
	passwordFile := fset.String("password-file", "", "read the password of every --backend URL that takes one from the first line of this file (see Credentials below)")
	only := fset.String("workloads", strings.Join(benchkit.AllKinds, ","), "comma-separated workloads to run; \"scale\" (the cost curves, see --held) runs alone")
	held, scaleWaiters, lockers := scaleFlags(fset, sc)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: lockctl bench [--backend URL]... [--servers] [--out DIR] [flags]

Measures lock backends side by side, each workload interleaved across them:
a flash sale with and without the lock (units sold, oversold, stale writes
refused by the fencing guard), uncontended acquire+release, handoff between
W waiters on one key, many workers over many keys, and a semaphore (N
permits of one key, contenders spread over several Lockers, a counter
checking that never more than N hold at once; "unsupported" on a backend
without permits) — each beside the backend's raw floor, the bare round
trips its protocol needs.

Flags:
`)
		fset.PrintDefaults()
		fmt.Fprint(fset.Output(), "\n"+credentialsHelp)
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
	if o.quick {
		// Quick sizes, then the flags again: explicit sizes win.
		c.Quick()
		sc.Quick()
		waiters = intList(c.Waiters)
		*held, *scaleWaiters, *lockers = sc.Held, sc.Waiters, sc.Lockers
		backends = nil
		_ = fset.Parse(args)
	}
	c.Waiters = waiters
	sc.Held, sc.Waiters, sc.Lockers = *held, *scaleWaiters, *lockers
	scale := *only == benchkit.KindScale
	fset.Visit(func(f *flag.Flag) {
		if f.Name == "ttl" {
			sc.TTL = c.TTL // explicit: the held leases' TTL too
		}
	})
	c.Workloads = strings.Split(*only, ",")
	err := c.Validate()
	if err == nil && scale {
		err = sc.Validate()
	}
	if err != nil {
		return a.failf(exitUsage, "bench: %v", err)
	}
	if o.backends, err = benchBackends(backends, *passwordFile); err != nil {
		return a.failf(exitUsage, "bench: %v", err)
	}

	ctx, stop := a.cancelOnSignal(ctx)
	defer stop()
	started := time.Now()
	machine := benchkit.ThisMachine()
	var info []benchkit.Server
	if o.servers {
		s, err := servers.Start(ctx, servers.Options{RedlockMasters: 5, Log: a.stderr})
		if err != nil {
			if sig := stop(); sig != nil {
				return a.failf(signalStatus(sig), "bench: interrupted by %v", sig)
			}
			return a.failf(exitUnavailable, "bench: %v", err)
		}
		defer func() {
			if err := s.Close(); err != nil {
				fmt.Fprintf(a.stderr, "lockctl: bench: %v\n", err)
			}
		}()
		urls := s.URLs()
		if scale {
			// Beside FOR UPDATE, the mode whose locks share connections.
			urls = append(urls, s.PostgresURL()+"&mode=advisory")
		}
		o.backends = append(plainBackends(urls), o.backends...)
		info = s.Info
	}
	if len(o.backends) == 0 {
		o.backends = plainBackends([]string{"memory://"})
	}
	if *failover > 0 {
		return a.benchFailover(ctx, o.backends, *failover, *failoverTTL)
	}
	if scale {
		return a.benchScale(ctx, sc, o, info, args, started)
	}

	subjects, err := a.openSubjects(ctx, c, o)
	defer func() {
		for _, s := range subjects {
			if s.Close != nil {
				_ = s.Close()
			}
		}
	}()
	if err != nil {
		return a.failf(lockStatus(err), "bench: %v", err)
	}

	results, err := benchkit.Run(ctx, c, subjects, benchkit.NewProgress(a.stderr, a.stderrIsTerminal))
	if len(results) > 0 {
		fmt.Fprintln(a.stdout, header(c))
		fmt.Fprintln(a.stdout)
		benchkit.ResultsTable(results).WriteText(a.stdout)
	}
	if err != nil {
		if sig := stop(); sig != nil {
			return a.failf(signalStatus(sig), "bench: interrupted by %v", sig)
		}
		// Runs that failed are reported; the rest of the report stands.
		fmt.Fprintf(a.stderr, "lockctl: bench: %v\n", err)
	}
	fmt.Fprintln(a.stdout)
	ok := benchkit.WriteVerdicts(a.stdout, results)
	checks := benchkit.Targets(results)
	if t := benchkit.TargetsTable(checks); t != nil {
		fmt.Fprintln(a.stdout)
		t.WriteText(a.stdout)
	}
	if o.out != "" {
		r := &benchkit.Report{
			Title:   "lockctl bench: backend against backend",
			Command: "lockctl bench " + redactArgs(args), Started: started, Finished: time.Now(),
			Machine: machine, Servers: info, Config: c, Results: results, Targets: checks,
			Notes: []string{"Every backend runs each workload in turn within a round, beside its raw floor; ratios to the floor are what compare across machines."},
		}
		if err := r.Write(o.out); err != nil {
			return a.failf(exitUnavailable, "bench: writing the report: %v", err)
		}
		fmt.Fprintf(a.stdout, "\nreport: %s\n", strings.TrimRight(o.out, "/")+"/report.md")
	}
	switch {
	case err != nil:
		return exitUnavailable
	case !ok:
		return exitFailed
	}
	return exitOK
}

// openSubjects opens every backend and, with o.floors, its floor right
// after it. On error it returns those it opened, for the caller to close.
func (a *app) openSubjects(ctx context.Context, c *benchkit.Config, o benchOptions) ([]*benchkit.Subject, error) {
	var subjects []*benchkit.Subject
	for _, b := range o.backends {
		u := b.url
		name := shortName(u)
		l, err := a.open(ctx, u, locker.WithOwner("lockctl bench"))
		if err != nil {
			return subjects, err
		}
		s := benchkit.Ours(name, name, l, locker.WithTTL(c.TTL))
		subjects = append(subjects, s)
		if slices.Contains(c.Workloads, benchkit.KindSemaphore) {
			for range c.SemLockers - 1 {
				l, err := a.open(ctx, u, locker.WithOwner("lockctl bench"))
				if err != nil {
					return subjects, err
				}
				s.AddLockers(l)
			}
		}
		if !o.floors {
			continue
		}
		f, err := floor.ForURL(ctx, u, name)
		if err != nil {
			return subjects, fmt.Errorf("%w: %v", locker.ErrUnavailable, err)
		}
		if f != nil {
			subjects = append(subjects, f)
		}
	}
	return subjects, nil
}

// header describes the run, so that a pasted table says what it measured.
func header(c *benchkit.Config) string {
	s := fmt.Sprintf("lockctl bench: flash sale %d buyers, %d units, %d paused holders; %d ops; %d handoffs with %s waiters; many keys %d workers × %d keys, %d ops; semaphore %d permits, %d contenders over %d Lockers, hold %v, %d grants; TTL %v; GOMAXPROCS %d",
		c.Buyers, c.Stock, c.Pauses, c.Ops, c.Handoffs, (*intList)(&c.Waiters).String(), c.ManyWorkers, c.ManyKeys, c.ManyOps,
		c.Permits, c.SemContenders, c.SemLockers, c.SemHold, c.SemOps, c.TTL, runtime.GOMAXPROCS(0))
	if c.Rounds > 1 {
		s += fmt.Sprintf("; totals over %d rounds", c.Rounds)
	}
	return s
}

// shortName names a backend in tables and charts: the URL without its
// password and query, and with only the first of several hosts.
func shortName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.User == nil && !strings.Contains(u.Host, ",") {
		return strings.SplitN(raw, "?", 2)[0] // as given: "memory://" stays so
	}
	u.User, u.RawQuery = nil, ""
	hosts := strings.Split(u.Host, ",")
	if len(hosts) == 1 {
		return u.String()
	}
	u.Host = hosts[0]
	s := u.String()
	i := strings.Index(s, hosts[0]) + len(hosts[0])
	return s[:i] + fmt.Sprintf(",…+%d", len(hosts)-1) + s[i:]
}
