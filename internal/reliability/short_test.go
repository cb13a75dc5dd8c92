package reliability_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/distlock/locker/history"
	"github.com/distlock/locker/internal/bounds"
	"github.com/distlock/locker/internal/reliability"
)

// The short mode: for every backend, one bounded history per fault of its
// catalogue (and one without faults), each fault injected at least once;
// 0 violations and 0 unknown checks within the guarantee; under the faults
// outside it, the fencing properties the backend still claims.

func TestMemory(t *testing.T)                  { checkAll(t, reliability.Memory(t)) }
func TestRedis(t *testing.T)                   { checkAll(t, reliability.Redis(t)) }
func TestRedlock(t *testing.T)                 { checkAll(t, reliability.Redlock(t)) }
func TestRedisSentinel(t *testing.T)           { checkAll(t, reliability.RedisSentinel(t)) }
func TestEtcd(t *testing.T)                    { checkAll(t, reliability.Etcd(t)) }
func TestEtcdCluster(t *testing.T)             { checkAll(t, reliability.EtcdCluster(t)) }
func TestZooKeeper(t *testing.T)               { checkAll(t, reliability.ZooKeeper(t)) }
func TestZooKeeperEnsemble(t *testing.T)       { checkAll(t, reliability.ZooKeeperEnsemble(t)) }
func TestEtcdClusterLinked(t *testing.T)       { checkAll(t, reliability.EtcdClusterLinked(t)) }
func TestZooKeeperEnsembleLinked(t *testing.T) { checkAll(t, reliability.ZooKeeperEnsembleLinked(t)) }
func TestPostgres(t *testing.T)                { checkAll(t, reliability.Postgres(t)) }
func TestPostgresFailover(t *testing.T)        { checkAll(t, reliability.PostgresFailover(t)) }

func checkAll(t *testing.T, d *reliability.Deployment) {
	d.WarmUp(t)
	t.Run("no faults", func(t *testing.T) { check(t, d, nil, reliability.RunOptions{}) })
	for _, f := range d.Faults {
		t.Run(strings.ReplaceAll(f.Name, " ", "_"), func(t *testing.T) { check(t, d, &f, reliability.RunOptions{}) })
	}
	// N-permit locks (where the backend has them) and elections: under the
	// deployment's most telling fault (its quiet spells are the fault-free
	// part), or without faults where it has none; the soak runs the whole
	// catalogue. One run each keeps the short mode's added time small.
	var telling *reliability.Fault
	if d.TellingFault != "" {
		i := slices.IndexFunc(d.Faults, func(f reliability.Fault) bool { return f.Name == d.TellingFault })
		if i < 0 {
			t.Fatalf("%s: TellingFault %q is not in its catalogue", d.Name, d.TellingFault)
		}
		telling = &d.Faults[i]
	}
	name := "no faults"
	if telling != nil {
		name = strings.ReplaceAll(telling.Name, " ", "_")
	}
	if d.Permits {
		t.Run("permits/"+name, func(t *testing.T) {
			check(t, d, telling, reliability.RunOptions{Limit: reliability.PermitsLimit})
		})
	}
	t.Run("elections/"+name, func(t *testing.T) { check(t, d, telling, reliability.RunOptions{Elections: true}) })
}

func check(t *testing.T, d *reliability.Deployment, f *reliability.Fault, o reliability.RunOptions) {
	// No goroutine of the run (clients, leases, the nemesis) outlives it.
	defer goleak.VerifyNone(t, notTheRuns()...)
	out, err := d.Run(t.Context(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	res := out.Result
	bounds.Took(t, "slowest step of the liveness check", res.LivenessSlowest, res.LivenessBound)
	t.Logf("%s: %v; %d injections, %d fault windows, %d liveness retries, slowest liveness step %v of %v", d.Name, res.Counts, out.Injected, len(res.Windows), out.LivenessRetries, res.LivenessSlowest.Round(time.Millisecond), res.LivenessBound)
	if f != nil && f.Outside != "" {
		t.Logf("outside the guarantee (%s): %d mutual-exclusion violations, not counted", f.Outside, out.Outside)
	}
	if !out.OK() {
		t.Errorf("seed %d: %d violations, %d unknown checks, nemesis error %v", res.Seed, len(out.Failed), len(res.UnknownKeys), res.NemesisErr)
		for _, v := range out.Failed {
			t.Errorf("%v", v)
		}
		writeVisualization(t, res)
	}
	if f != nil && out.Injected == 0 {
		t.Errorf("the fault %q was never injected: the run proves nothing about it", f.Name)
	}
	if res.Counts.Acquisitions == 0 {
		t.Errorf("no acquisition succeeded: %v", res.Counts)
	}
}

// notTheRuns are the goroutines that were there before the run and a run leaves that are not the run's:
// testenv's readiness probes (after a restart) keep idle HTTP connections
// to etcd in http.DefaultClient; the in-process toxiproxy keeps its proxies'
// accept loops, and a link's goroutines live until the server closes its
// side of a connection the client closed.
func notTheRuns() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).server"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*Proxy).freeBlocker"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
		// A slow disk's FUSE server starts readers as requests come.
		goleak.IgnoreAnyFunction("github.com/hanwen/go-fuse/v2/fuse.(*Server).loop"),
	}
}

func writeVisualization(t *testing.T, res *history.Result) {
	dir := os.Getenv(history.DirEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	if path, err := res.WriteVisualization(dir, history.DefaultCheckTimeout); err != nil {
		t.Logf("writing the visualisation: %v", err)
	} else {
		t.Logf("visualisation: %s", path)
	}
}
