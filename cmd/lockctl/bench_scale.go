package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/benchkit/floor"
)

// scaleFlags registers the sizes of the scale workload on fset.
func scaleFlags(fset *flag.FlagSet, sc *benchkit.ScaleConfig) (held, waiters, lockers *intList) {
	held, waiters, lockers = (*intList)(&sc.Held), (*intList)(&sc.Waiters), (*intList)(&sc.Lockers)
	fset.Var(held, "held", "scale: comma-separated numbers of leases held at once by one Locker")
	fset.Var(waiters, "scale-waiters", "scale: comma-separated numbers of waiters on one key")
	fset.IntVar(&sc.Spread, "spread", sc.Spread, "scale: Lockers the waiters are spread over (besides all in one)")
	fset.Var(lockers, "lockers", "scale: comma-separated numbers of Lockers doing acquire+release on keys of their own")
	fset.IntVar(&sc.Probe, "probe", sc.Probe, "scale: acquire+release pairs timed beside each number of held leases")
	fset.IntVar(&sc.Handoffs, "scale-handoffs", sc.Handoffs, "scale: handoffs timed per number of waiters W, after W untimed grants")
	fset.IntVar(&sc.Ops, "scale-ops", sc.Ops, "scale: acquire+release pairs per Locker")
	fset.DurationVar(&sc.Window, "refresh-window", sc.Window, "scale: how long refreshes are counted beside the held leases (default one TTL)")
	return held, waiters, lockers
}

// benchScale runs the scale workload on the backends and reports it.
func (a *app) benchScale(ctx context.Context, sc *benchkit.ScaleConfig, o benchOptions, info []benchkit.Server, args []string, started time.Time) int {
	machine := benchkit.ThisMachine()
	var targets []*benchkit.ScaleTarget
	defer func() {
		for _, t := range targets {
			if t.Stat != nil {
				_ = t.Stat.Close()
			}
		}
	}()
	for _, b := range o.backends {
		t, err := a.scaleTarget(ctx, b.url)
		if err != nil {
			return a.failf(exitUnavailable, "bench: %v", err)
		}
		targets = append(targets, t)
	}
	pts, err := benchkit.Scale(ctx, sc, targets, benchkit.NewProgress(a.stderr, a.stderrIsTerminal))
	fmt.Fprintf(a.stdout, "lockctl bench scale: held %s (TTL %v); waiters %s in one Locker and over %d; Lockers %s\n",
		(*intList)(&sc.Held), sc.TTL, (*intList)(&sc.Waiters), sc.Spread, (*intList)(&sc.Lockers))
	for _, t := range benchkit.ScaleTables(pts) {
		fmt.Fprintln(a.stdout)
		t.WriteText(a.stdout)
	}
	fmt.Fprintln(a.stdout)
	benchkit.ScaleGrowth(pts).WriteText(a.stdout)
	checks := benchkit.ScaleTargets(pts)
	if t := benchkit.ScaleTargetsTable(checks); t != nil {
		fmt.Fprintln(a.stdout)
		t.WriteText(a.stdout)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "lockctl: bench: %v\n", err)
	}
	if o.out != "" {
		r := &benchkit.ScaleReport{Title: "lockctl bench: cost curves", Command: "lockctl bench " + redactArgs(args),
			Started: started, Finished: time.Now(), Machine: machine, Servers: info, Config: sc, Points: pts, Targets: checks}
		if err := r.Write(o.out); err != nil {
			return a.failf(exitUnavailable, "bench: writing the report: %v", err)
		}
		fmt.Fprintf(a.stdout, "\nreport: %s\n", strings.TrimRight(o.out, "/")+"/report.md")
	}
	if err != nil {
		if sig := ctx.Err(); sig != nil {
			return a.failf(exitUnavailable, "bench: interrupted")
		}
		return exitUnavailable
	}
	return exitOK
}

// scaleTarget makes the scale target of one backend URL: its Lockers
// opened on demand, its server probe, and for PostgreSQL FOR UPDATE (a
// connection per held lease or waiter) the connection budget.
func (a *app) scaleTarget(ctx context.Context, raw string) (*benchkit.ScaleTarget, error) {
	t := &benchkit.ScaleTarget{Name: shortName(raw), Refreshes: refreshCounter,
		Open: func(ctx context.Context, opts ...locker.Option) (locker.Locker, error) {
			return a.open(ctx, raw, append(opts, locker.WithOwner("lockctl bench"))...)
		}}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if m := q.Get("mode"); m != "" {
		t.Name += "?mode=" + m // the two PostgreSQL modes side by side
	}
	st, err := floor.StatForURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", locker.ErrUnavailable, err)
	}
	if st != nil {
		t.Stat = st
	}
	if s := strings.ToLower(u.Scheme); (s == "postgres" || s == "postgresql") && q.Get("mode") != "advisory" {
		n, err := strconv.Atoi(q.Get("max_conns"))
		if b, ok := st.(interface {
			ConnBudget(context.Context) (int, error)
		}); err != nil && ok {
			n, err = b.ConnBudget(ctx)
		}
		if p, err2 := strconv.Atoi(q.Get("pool_max_conns")); err2 == nil && (err != nil || p < n) {
			n, err = p, nil // the budget is never more than the pool
		}
		if err == nil {
			// One connection left for the acquisitions timed beside
			// the held leases.
			t.Budget = n - 1
		}
	}
	return t, nil
}
