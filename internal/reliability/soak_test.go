package reliability_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/distlock/locker/history"
	"github.com/distlock/locker/internal/bounds"
	"github.com/distlock/locker/internal/reliability"
)

// The soak: go test ./internal/reliability -run '^TestSoak$' -soak 10m -v -timeout 0
// (see docs/reliability.md for the full command). Without -soak, TestSoak
// soaks the memory backend for 3 s: CI checks the machinery, the short
// tests check the backends.
var (
	soakFor        = flag.Duration("soak", 0, "soak: run histories for this long per backend, split evenly over its fault mix (0: skip the soak)")
	soakBackends   = flag.String("soak.backends", "memory,redis,redlock,etcd,zookeeper,postgres", "soak: the backends, comma-separated")
	soakKeys       = flag.Int("soak.keys", 12, "soak: keys per history run (each key's history is checked on its own)")
	soakClients    = flag.Int("soak.clients", reliability.Slots, "soak: clients per history run (above the deployment's client paths, clients share them in turn)")
	soakRun        = flag.Duration("soak.run", 0, "soak: how long the clients of a run start operations (0: the deployment's default, TTL + 1.5 s and at least 2.5 s; never less than a fault's RunFor)")
	soakParallel   = flag.Int("soak.parallel", 1, "soak: backends soaked at once (each starts its own cluster containers)")
	soakOut        = flag.String("soak.out", "", "soak: also write the table, in Markdown, to this file")
	soakHistories  = flag.Int("soak.histories", 0, "soak: run each deployment past its share of -soak until it has checked this many contended histories (three clients or more on the key; split evenly over its faults)")
	soakInjections = flag.Int("soak.injections", 0, "soak: run each fault past its share of -soak until it has been injected this many times")
	soakFaults     = flag.String("soak.faults", "", "soak: only the faults whose name matches this regular expression (\"none\" names the fault-free runs)")
	soakDeploys    = flag.String("soak.deployments", "", "soak: only the deployments whose name matches this regular expression (\"etcd-3\", \"redis-sentinel\", …)")
	soakStop       = flag.Duration("soak.stop", 0, "soak: start no run after this long in all (0: no limit), and print the table of what ran: a bound on -soak.histories and -soak.injections")
	soakElect      = flag.Bool("soak.elections", false, "soak: run elections (history.Options.Elections) instead of locks")
	soakPermits    = flag.Int("soak.permits", 1, "soak: above 1, run N-permit locks of this limit (history.Options.Limit) instead of locks; backends without permits are left out")
)

// backends maps a backend to its deployments.
var backends = map[string][]func(testing.TB) *reliability.Deployment{
	"memory":    {reliability.Memory},
	"redis":     {reliability.Redis, reliability.RedisSentinel},
	"redlock":   {reliability.Redlock},
	"etcd":      {reliability.Etcd, reliability.EtcdCluster, reliability.EtcdClusterLinked},
	"zookeeper": {reliability.ZooKeeper, reliability.ZooKeeperEnsemble, reliability.ZooKeeperEnsembleLinked},
	"postgres":  {reliability.Postgres, reliability.PostgresFailover},
}

// stopAt is when -soak.stop ends the soak.
var stopAt time.Time

// maxFailedInARow is how many runs of one fault may fail in a row before a
// deployment's soak gives up.
const maxFailedInARow = 3

// row is one line of the table: a deployment under one fault.
type row struct {
	backend, deployment, fault, outside string
	counts                              history.Counts
	failedRuns, outsideViolations       int
	injections, livenessRetries         int
}

func TestSoak(t *testing.T) {
	soak, names := *soakFor, strings.Split(*soakBackends, ",")
	if soak <= 0 {
		// Without -soak (as in CI), a 3-second soak of the memory backend
		// proves the machinery and its table; nothing skips.
		soak, names = 3*time.Second, []string{"memory"}
	}
	for _, n := range names {
		if backends[n] == nil {
			t.Fatalf("-soak.backends: unknown backend %q", n)
		}
	}
	faults, err := regexp.Compile(*soakFaults)
	if err != nil {
		t.Fatalf("-soak.faults: %v", err)
	}
	deployments, err := regexp.Compile(*soakDeploys)
	if err != nil {
		t.Fatalf("-soak.deployments: %v", err)
	}
	start := time.Now()
	stopAt = time.Now().Add(time.Duration(1<<63 - 1))
	if *soakStop > 0 {
		stopAt = start.Add(*soakStop)
	}
	results := make([][]*row, len(names))
	sem := make(chan struct{}, max(1, *soakParallel))
	t.Run("backends", func(t *testing.T) {
		for i, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				results[i] = soakBackend(t, name, soak, faults, deployments)
			})
		}
	})
	var all []*row
	for _, rs := range results {
		all = append(all, rs...)
	}
	host, _ := os.Hostname()
	what := "locks"
	switch {
	case *soakElect:
		what = "elections"
	case *soakPermits > 1:
		what = fmt.Sprintf("%d-permit locks", *soakPermits)
	}
	header := fmt.Sprintf("Soak of "+what+", %v per backend, %s, finished %s, on %s (%d CPUs, %s/%s, %s), %v in all.",
		soak, strings.Join(names, ","), time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		runtime.Version(), time.Since(start).Round(time.Second))
	table := markdown(all)
	t.Logf("%s\n\n%s", header, plain(all))
	for _, r := range all {
		if r.counts.Runs == 0 || r.counts.Histories == 0 {
			t.Errorf("%s / %s: no history checked", r.deployment, r.fault)
		}
	}
	if len(all) == 0 {
		t.Error("the soak ran nothing")
	}
	if *soakOut != "" {
		if err := os.WriteFile(*soakOut, []byte(header+"\n\n"+table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// soakBackend runs every deployment of a backend under every fault of its
// catalogue, and without faults, for an even share of -soak each.
func soakBackend(t *testing.T, name string, soak time.Duration, faults, deployments *regexp.Regexp) []*row {
	type job struct {
		d *reliability.Deployment
		f *reliability.Fault
	}
	var rows []*row
	for _, mk := range backends[name] {
		// Each deployment in a subtest of its own, so that its cluster
		// is removed before the next one starts.
		t.Run("", func(t *testing.T) {
			d := mk(t)
			if !deployments.MatchString(d.Name) {
				return // its name is known once it is made: one start lost
			}
			if *soakPermits > 1 && !d.Permits {
				t.Logf("%s: no N-permit locks, left out of the permit soak", d.Name)
				return
			}
			d.WarmUp(t)
			var jobs []job
			if faults.MatchString("none") {
				jobs = append(jobs, job{d, nil})
			}
			for _, f := range d.Faults {
				if faults.MatchString(f.Name) {
					jobs = append(jobs, job{d, &f})
				}
			}
			if len(jobs) == 0 {
				return
			}
			share := soak / time.Duration(len(jobs)*len(backends[name]))
			for _, j := range jobs {
				if time.Now().After(stopAt) {
					return
				}
				r := &row{backend: name, deployment: d.Name, fault: "none"}
				if j.f != nil {
					r.fault, r.outside = j.f.Name, j.f.Outside
				}
				rows = append(rows, r)
				minHistories := (*soakHistories + len(jobs) - 1) / len(jobs)
				failedInARow := 0
				for end := time.Now().Add(share); time.Now().Before(end) || r.counts.Runs == 0 || r.counts.Contended < minHistories ||
					j.f != nil && r.injections < *soakInjections; {
					if t.Context().Err() != nil || r.counts.Runs > 0 && time.Now().After(stopAt) {
						return
					}
					failed := r.failedRuns
					soakOnce(t, j.d, j.f, r)
					if r.failedRuns == failed {
						failedInARow = 0
					} else if failedInARow++; failedInARow == maxFailedInARow {
						// The deployment is likely broken for good (a fault
						// that failed half-way): its other faults would fail
						// the same way, and the volume targets would keep
						// this one going forever.
						t.Errorf("%s / %s: %d runs failed in a row; the deployment's soak stops here", d.Name, r.fault, failedInARow)
						return
					}
				}
				t.Logf("%s / %s: %v, %d contended, %d injections", d.Name, r.fault, r.counts, r.counts.Contended, r.injections)
			}
		})
	}
	return rows
}

func soakOnce(t *testing.T, d *reliability.Deployment, f *reliability.Fault, r *row) {
	o := reliability.RunOptions{Keys: *soakKeys, Clients: *soakClients, Elections: *soakElect}
	if *soakPermits > 1 {
		o.Limit = *soakPermits
	}
	switch {
	case *soakRun > 0:
		o.Duration = *soakRun
		if f != nil {
			o.Duration = max(o.Duration, f.RunFor)
		}
	case d.Name == "memory":
		o.Duration = time.Second
	}
	out, err := d.Run(t.Context(), f, o)
	if err != nil {
		t.Errorf("%s / %s: %v", d.Name, r.fault, err)
		r.failedRuns++
		return
	}
	r.counts.Add(out.Result.Counts)
	bounds.Took(t, "slowest step of the liveness check", out.Result.LivenessSlowest, out.Result.LivenessBound)
	// Violations that count are the ones Judge kept; the table shows
	// those, and the outside ones apart.
	r.counts.Violations += len(out.Failed) - out.Result.Counts.Violations
	r.outsideViolations += out.Outside
	r.injections += out.Injected
	r.livenessRetries += out.LivenessRetries
	if !out.OK() {
		r.failedRuns++
		res := out.Result
		t.Errorf("%s / %s, seed %d: %d violations, %d unknown checks, nemesis error %v", d.Name, r.fault, res.Seed, len(out.Failed), len(res.UnknownKeys), res.NemesisErr)
		for _, v := range out.Failed {
			t.Errorf("%v", v)
		}
		writeVisualization(t, res)
	}
}

var columns = []string{"backend", "deployment", "fault", "guarantee", "runs", "injections", "histories", "contended (≥ 3 clients)", "operations",
	"acquisitions", "stale writes refused", "ambiguous ops", "violations", "unknown checks", "mutex violations outside guarantee", "liveness retries", "failed runs"}

func (r *row) cells() []string {
	g := "within"
	out := "–"
	switch r.outside {
	case "":
	case "mixed": // a total over faults within and outside
		g = "mixed"
		out = fmt.Sprint(r.outsideViolations)
	default:
		g = "outside: fencing only"
		out = fmt.Sprint(r.outsideViolations)
	}
	c := r.counts
	return []string{r.backend, r.deployment, r.fault, g, fmt.Sprint(c.Runs), fmt.Sprint(r.injections), fmt.Sprint(c.Histories), fmt.Sprint(c.Contended),
		fmt.Sprint(c.Operations), fmt.Sprint(c.Acquisitions), fmt.Sprint(c.StaleWritesRefused), fmt.Sprint(c.Ambiguous),
		fmt.Sprint(c.Violations), fmt.Sprint(c.Unknown), out, fmt.Sprint(r.livenessRetries), fmt.Sprint(r.failedRuns)}
}

// totals adds up the rows of each backend.
func totals(rows []*row) []*row {
	var out []*row
	byName := map[string]*row{}
	for _, r := range rows {
		tr := byName[r.backend]
		if tr == nil {
			tr = &row{backend: r.backend, deployment: "all", fault: "**total**"}
			byName[r.backend] = tr
			out = append(out, tr)
		}
		tr.counts.Add(r.counts)
		tr.injections += r.injections
		tr.livenessRetries += r.livenessRetries
		tr.outsideViolations += r.outsideViolations
		tr.failedRuns += r.failedRuns
		if r.outside != "" {
			tr.outside = "mixed"
		}
	}
	return out
}

func markdown(rows []*row) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n|")
	b.WriteString(strings.Repeat(" --- |", len(columns)) + "\n")
	for _, r := range append(append([]*row(nil), rows...), totals(rows)...) {
		b.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
	}
	return b.String()
}

func plain(rows []*row) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(columns, "\t"))
	for _, r := range append(append([]*row(nil), rows...), totals(rows)...) {
		fmt.Fprintln(w, strings.Join(r.cells(), "\t"))
	}
	w.Flush()
	return b.String()
}
