// Command bench runs locker's backends beside the peer libraries that do the
// same job, against the same servers in the same run, and reports the
// ratios ours ÷ theirs:
//
//	redis      locker's redis backend   vs github.com/go-redsync/redsync/v4, github.com/bsm/redislock
//	redlock    locker's Redlock, 5 masters  vs redsync over the same 5 masters
//	etcd       locker's etcd backend    vs go.etcd.io/etcd/client/v3/concurrency.Mutex
//	zookeeper  locker's zookeeper backend vs github.com/go-zookeeper/zk's Lock
//	postgres   locker's postgres backend, FOR UPDATE and ?mode=advisory, vs pg_advisory_lock through pgx
//
// each beside the raw floor of its group (package benchkit/floor). The
// workloads are benchkit's: uncontended acquire+release, handoff between W
// waiters on one key, and many workers over many keys, interleaved across
// the subjects of a group round by round. The flash sale is lockctl's: the
// peers have no fencing tokens.
//
// This is its own module, so that locker never depends on the peers.
//
// Usage, from this directory:
//
//	go run . --servers --out ../docs/benchmarks/peers   # start servers in Docker, run, remove them
//	go run . --quick --servers --out /tmp/x             # a smoke test of a minute
//	go run . --redis 127.0.0.1:6379 --groups redis      # against running servers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/benchkit/floor"
	"github.com/distlock/locker/benchkit/servers"
	_ "github.com/distlock/locker/etcd"
	_ "github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
)

// allGroups lists the groups in the order they run and print.
var allGroups = []string{"redis", "redlock", "etcd", "zookeeper", "postgres"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// addrs are where the servers are.
type addrs struct {
	redis, etcd, zookeeper, postgres string
	redlock                          []string
}

// run is the command, returning its exit status: 0, 1 if a run failed, 2
// on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := benchkit.NewConfig()
	c.Workloads = []string{benchkit.KindUncontended, benchkit.KindHandoff, benchkit.KindManyKeys}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	useServers := fs.Bool("servers", false, "start the servers in Docker from the images of scripts/test-images, and remove them afterwards")
	out := fs.String("out", "", "write report.md, results.json and charts (SVG, PNG) into this directory")
	quick := fs.Bool("quick", false, "tiny sizes, one round: a smoke test, not a measurement")
	groupsFlag := fs.String("groups", strings.Join(allGroups, ","), "comma-separated groups to run")
	var a addrs
	var redlockAddrs string
	fs.StringVar(&a.redis, "redis", "", "host:port of a Redis server (instead of --servers)")
	fs.StringVar(&redlockAddrs, "redlock", "", "comma-separated host:port of independent Redis masters")
	fs.StringVar(&a.etcd, "etcd", "", "host:port of an etcd server")
	fs.StringVar(&a.zookeeper, "zookeeper", "", "host:port of a ZooKeeper server")
	fs.StringVar(&a.postgres, "postgres", "", "postgres:// URL of a PostgreSQL database")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "timed runs of every workload per subject, interleaved")
	fs.IntVar(&c.Ops, "ops", c.Ops, "uncontended: acquire+release pairs per round")
	fs.IntVar(&c.Handoffs, "handoffs", c.Handoffs, "handoff: handoffs per round and number of waiters")
	fs.IntVar(&c.ManyOps, "many-ops", c.ManyOps, "many keys: acquire+release pairs per round")
	waiters := fs.String("waiters", "1,8,32,128", "handoff: comma-separated numbers of waiters")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *quick {
		// Quick sizes, then the flags again: explicit sizes win.
		c.Quick()
		*waiters = "1,8"
		_ = fs.Parse(args)
	}
	c.Waiters = nil
	for _, f := range strings.Split(*waiters, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(stderr, "bench: --waiters: %q is not a number\n", f)
			return 2
		}
		c.Waiters = append(c.Waiters, n)
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	groups := strings.Split(*groupsFlag, ",")
	for _, g := range groups {
		if !slices.Contains(allGroups, g) {
			fmt.Fprintf(stderr, "bench: --groups: unknown group %q (have %s)\n", g, strings.Join(allGroups, ", "))
			return 2
		}
	}
	if redlockAddrs != "" {
		a.redlock = strings.Split(redlockAddrs, ",")
	}

	started := time.Now()
	machine := benchkit.ThisMachine()
	var info []benchkit.Server
	if *useServers {
		s, err := servers.Start(ctx, servers.Options{RedlockMasters: 5, Log: stderr})
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		defer func() {
			if err := s.Close(); err != nil {
				fmt.Fprintf(stderr, "bench: %v\n", err)
			}
		}()
		a = addrs{redis: s.Redis, redlock: s.Redlock, etcd: s.Etcd, zookeeper: s.ZooKeeper, postgres: s.Postgres}
		info = s.Info
	}

	subjects, err := openSubjects(ctx, c, a, groups)
	defer func() {
		for _, s := range subjects {
			if s.Close != nil {
				_ = s.Close()
			}
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	if len(subjects) == 0 {
		fmt.Fprintln(stderr, "bench: no servers: give --servers, or addresses with --redis, --redlock, --etcd, --zookeeper, --postgres")
		return 2
	}

	// Groups run one after another (their servers differ); within a group
	// every workload interleaves its subjects.
	var results []*benchkit.Result
	failed := false
	for _, g := range groups {
		var gs []*benchkit.Subject
		for _, s := range subjects {
			if s.Group == g {
				gs = append(gs, s)
			}
		}
		if len(gs) == 0 {
			continue
		}
		fmt.Fprintf(stderr, "bench: %s: %d subjects\n", g, len(gs))
		rs, err := benchkit.Run(ctx, c, gs, benchkit.NewProgress(stderr, isTerminal(os.Stderr)))
		results = append(results, rs...)
		if err != nil {
			// Reported, and the group's failed rows show their error
			// counts; the other groups still run unless stopped.
			failed = true
			fmt.Fprintf(stderr, "bench: %s: %v\n", g, err)
			if ctx.Err() != nil {
				benchkit.ResultsTable(results).WriteText(stdout)
				return 1
			}
		}
	}
	benchkit.ResultsTable(results).WriteText(stdout)
	fmt.Fprintln(stdout)
	if t := benchkit.PeerTable(results); t != nil {
		t.WriteText(stdout)
		fmt.Fprintln(stdout)
	}
	checks := benchkit.Targets(results)
	benchkit.TargetsTable(checks).WriteText(stdout)
	ok := benchkit.WriteVerdicts(io.Discard, results)
	if *out != "" {
		r := &benchkit.Report{
			Title:   "locker against the peer libraries",
			Command: "cd bench && go run . " + strings.Join(args, " "), Started: started, Finished: time.Now(),
			Machine: machine, Servers: info, Config: c, Results: results, Targets: checks, PerGroupCharts: true,
			Notes: []string{
				"Each group runs against one server (or, for Redlock, five masters); its subjects — our backend, the peer libraries, the raw floor — take turns within every round of every workload.",
				"Peers as configured here: redsync with expiry = TTL and its default retry delay (50–250 ms at random), tries raised so that 128 waiters do not give up; redislock with LinearBackoff(10 ms); concurrency.Mutex with one session per concurrent holder, taken from a pool; zk.Lock on one shared connection (as our Locker uses one session); pg_advisory_lock(hashtextextended(key, 0)) on a pooled connection. Our backends: one Locker per group (PostgreSQL: one per mode, FOR UPDATE and ?mode=advisory), opened from its URL, TTL 15 s.",
			},
		}
		if err := r.Write(*out); err != nil {
			fmt.Fprintf(stderr, "bench: writing the report: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nreport: %s/report.md\n", strings.TrimRight(*out, "/"))
	}
	if !ok || failed {
		return 1
	}
	return 0
}

// openSubjects opens, for every group asked for whose server is known, our
// backend, the peers and the floor, in that order. On error it returns
// those it opened, for the caller to close.
func openSubjects(ctx context.Context, c *benchkit.Config, a addrs, groups []string) ([]*benchkit.Subject, error) {
	var out []*benchkit.Subject
	oursNamed := func(name, group, url string) error {
		l, err := locker.Open(ctx, url, locker.WithOwner("locker bench"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, benchkit.Ours(name, group, l, locker.WithTTL(c.TTL)))
		return nil
	}
	ours := func(group, url string) error { return oursNamed("locker "+group, group, url) }
	addFloor := func(group, url string) error {
		f, err := floor.ForURL(ctx, url, group)
		if err != nil {
			return err
		}
		if f != nil {
			out = append(out, f)
		}
		return nil
	}
	add := func(s *benchkit.Subject, err error) error {
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	}
	for _, g := range groups {
		var err error
		switch {
		case g == "redis" && a.redis != "":
			u := "redis://" + a.redis + "?pool_size=160"
			err = errors.Join(ours(g, u), add(newRedsync(g, []string{a.redis}, c.TTL), nil), add(newRedislock(a.redis, c.TTL), nil), addFloor(g, u))
		case g == "redlock" && len(a.redlock) > 0:
			// node_timeout 1 s instead of TTL/10 capped at 250 ms: 64 workers
			// over 5 masters on a loaded 2-CPU machine exceed 250 ms, and
			// redsync waits for go-redis's 3 s read timeout.
			u := "redlock://" + strings.Join(a.redlock, ",") + "?pool_size=160&node_timeout=1s"
			err = errors.Join(ours(g, u), add(newRedsync(g, a.redlock, c.TTL), nil), addFloor(g, u))
		case g == "etcd" && a.etcd != "":
			u := "etcd://" + a.etcd
			if err = ours(g, u); err == nil {
				err = add(newEtcdMutex([]string{a.etcd}, c.TTL))
			}
			err = errors.Join(err, addFloor(g, u))
		case g == "zookeeper" && a.zookeeper != "":
			u := "zookeeper://" + a.zookeeper
			if err = ours(g, u); err == nil {
				err = add(newZkLock(ctx, []string{a.zookeeper}))
			}
			err = errors.Join(err, addFloor(g, u))
		case g == "postgres" && a.postgres != "":
			u := withParam(a.postgres, "pool_max_conns=160&max_conns=160")
			// Both modes: advisory is the same protocol as the peer plus
			// the token; FOR UPDATE pins a connection per held lock.
			if err = ours(g, u); err == nil {
				err = oursNamed("locker postgres advisory", g, withParam(u, "mode=advisory"))
			}
			if err == nil {
				err = add(newAdvisory(ctx, a.postgres))
			}
			err = errors.Join(err, addFloor(g, u))
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func withParam(u, kv string) string {
	if strings.Contains(u, "?") {
		return u + "&" + kv
	}
	return u + "?" + kv
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
