package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/testenv"
)

// TestMain removes the servers the real-backend bench tests shared.
func TestMain(m *testing.M) { testenv.Main(m) }

func TestBench_TwoBackends_SideBySide(t *testing.T) {
	a, stdout, stderr := testApp()
	code := a.main(context.Background(), []string{"bench",
		"--backend", "memory://" + t.Name() + "a", "--backend", "memory://" + t.Name() + "b",
		"--buyers", "2000", "--ops", "200", "--waiters", "4", "--handoffs", "100", "--many-ops", "300",
		"--pause-ttl", "50ms", "--rounds", "2"})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	out := stdout.String()
	for _, want := range []string{
		"ok    flash sale on memory://" + t.Name() + "a: 100 units sold of 100, none oversold",
		"ok    flash sale on memory://" + t.Name() + "b: 100 units sold of 100, none oversold",
		"without a lock:",
		"ok    semaphore on memory://" + t.Name() + "b: at most ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Table rows: the workload column is as wide as its longest label.
	for _, row := range []string{
		`uncontended acquire\+release +memory://` + t.Name() + "a ",
		`handoff, 4 waiters +memory://` + t.Name() + "b ",
		`many keys, 64 workers, 1000 keys +memory://` + t.Name() + "a ",
		`semaphore, 4 permits, 64 contenders +memory://` + t.Name() + "a ",
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("output lacks a row matching %q:\n%s", row, out)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr not a terminal, yet written to: %q", stderr)
	}
}

func TestBench_Out_WritesReportJSONAndCharts(t *testing.T) {
	dir := t.TempDir()
	a, stdout, stderr := testApp()
	code := a.main(context.Background(), []string{"bench", "--quick", "--waiters", "1,4",
		"--backend", "memory://" + t.Name(), "--out", dir})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Machine", "## Results", "lockctl bench --quick", "![", "latency-all.svg", "handoff-latency-all.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, f := range []string{"latency-all.svg", "latency-all.png", "handoff-latency-all.svg", "handoff-latency-all.png", "handoff-rate-all.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("chart %s: %v", f, err)
		}
	}
	var rep struct {
		Results []struct {
			Kind    string  `json:"kind"`
			Waiters int     `json:"waiters"`
			Ops     int     `json:"ops"`
			P50     float64 `json:"p50_us"`
		} `json:"results"`
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range rep.Results {
		kinds[r.Kind]++
		if r.Ops == 0 {
			t.Errorf("result %s/%d has no operations", r.Kind, r.Waiters)
		}
	}
	// flash sale, its control, uncontended, handoff at 1 and 4, many keys.
	if kinds["handoff"] != 2 || kinds["uncontended"] != 1 || kinds["many-keys"] != 1 || kinds["flash-sale"] != 1 {
		t.Errorf("results by kind %v", kinds)
	}
}

func TestBench_BadInput_Usage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--buyers", "0"},
		{"bench", "--workloads", "nope"},
		{"bench", "--ttl", "-1s"},
		{"bench", "--waiters", "0"},
		{"bench", "--waiters", "x"},
		{"bench", "--permits", "0"},
		{"bench", "--sem-contenders", "0"},
		{"bench", "--sem-lockers", "0"},
		{"bench", "--sem-ops", "0"},
		{"bench", "--sem-hold", "-1ms"},
		{"bench", "stray"},
		{"bench", "--backend", "nosuch://x"},
		{"bench", "--no-such-flag"},
	} {
		a, _, stderr := testApp()
		if code := a.main(context.Background(), args); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr)
		}
	}
}

// TestBench_RealBackends_Quick runs a quick bench of each backend beside its
// floor against the testenv servers, then the quick scale workload: the
// floors' clients, the server probes and the URL parsing that finds them
// must keep working.
func TestBench_RealBackends_Quick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, b := range []struct {
		name  string
		url   func(t *testing.T) string
		floor string
	}{
		{"redis", func(t *testing.T) string { return "redis://" + testenv.Redis(t).Addr() }, "floor 2×PING"},
		// A request may wait far past etcd's 5 s default on a loaded CI
		// machine (a release of the scale probe did); this checks the
		// tool, not the server's latency.
		{"etcd", func(t *testing.T) string {
			return "etcd://" + testenv.Etcd(t).Addr() + "/" + t.Name() + "?request_timeout=1m"
		}, "floor txn put+delete"},
		{"zookeeper", func(t *testing.T) string { return "zookeeper://" + testenv.ZooKeeper(t).Addr() + "/lockctl-bench" }, "floor create+children+delete"},
		{"postgres", func(t *testing.T) string { return withQuery(t, testenv.PostgresDB(t), "pool_max_conns", "12") }, "floor 2×SELECT 1"},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			a, stdout, stderr := testApp()
			code := a.main(context.Background(), []string{"bench", "--quick", "--waiters", "1,4", "--many-workers", "8",
				"--workloads", "flash-sale,uncontended,handoff,many-keys", "--backend", u})
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
			}
			out := stdout.String()
			for _, want := range []string{"ok    flash sale on ", "uncontended acquire+release", b.floor, "handoff, 4 waiters", "p50 ÷ floor"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// The scale workload's quick form, as CI runs it: its server
			// probe reads this backend's memory.
			a, stdout, stderr = testApp()
			if b.name == "postgres" {
				u = withQuery(t, u, "mode", "advisory") // FOR UPDATE's budget of 12 would skip N = 100
			}
			code = a.main(context.Background(), []string{"bench", "--quick", "--workloads", "scale", "--backend", u})
			if code != exitOK {
				t.Fatalf("scale: exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
			}
			if out := stdout.String(); !regexp.MustCompile(`server .* per lock \(N\)`).MatchString(out) {
				t.Errorf("scale output lacks the server's memory per lock:\n%s", out)
			}
		})
	}
}

// withQuery sets a query parameter of a URL.
func withQuery(t *testing.T, raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestShortName(t *testing.T) {
	for in, want := range map[string]string{
		"redlock://a:1,b:2,c:3/0?x=y":             "redlock://a:1,…+2/0",
		"postgres://u:secret@h:5432/db?sslmode=x": "postgres://h:5432/db",
		"memory://": "memory://",
	} {
		if got := shortName(in); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
}
