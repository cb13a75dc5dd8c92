package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBench_Scale_Quick_Memory runs the scale workload's --quick form (the
// one CI runs) and checks it measured every curve and wrote its charts.
func TestBench_Scale_Quick_Memory(t *testing.T) {
	dir := t.TempDir()
	a, stdout, stderr := testApp()
	u := "memory://" + t.Name()
	code := a.main(context.Background(), []string{"bench", "--workloads", "scale", "--quick", "--backend", u, "--out", dir})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"held N", "waiters W", "Lockers L", "client heap per lease (N)", "acquire p50 at N = 100 ÷ N = 10"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "scale.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Points []struct {
			Curve         string  `json:"curve"`
			X             int     `json:"x"`
			Errors        int     `json:"errors"`
			Skipped       string  `json:"skipped"`
			RefreshPerSec float64 `json:"refresh_per_sec"`
			OpsPerSec     float64 `json:"ops_per_sec"`
		} `json:"points"`
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	curves := map[string]int{}
	for _, p := range rep.Points {
		curves[p.Curve]++
		if p.Errors != 0 || p.Skipped != "" || p.OpsPerSec <= 0 {
			t.Errorf("point %+v: want measured without errors", p)
		}
		// A TTL of 15 s refreshes every lease every 5 s: each at least
		// once in the 6 s window.
		if p.Curve == "held" && p.X == 100 && p.RefreshPerSec < 10 {
			t.Errorf("%d held leases refreshed %.0f times a second, want about 20", p.X, p.RefreshPerSec)
		}
	}
	if curves["held"] != 2 || curves["waiters"] != 2 || curves["waiters-spread"] != 2 || curves["lockers"] != 2 {
		t.Errorf("points by curve %v", curves)
	}
	for _, f := range []string{"report.md", "scale-heap-per-lease.svg", "scale-handoff-p99.png", "scale-lockers-throughput.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestBench_Scale_BadInput_Usage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--workloads", "scale,uncontended"},
		{"bench", "--workloads", "scale", "--held", "0"},
		{"bench", "--workloads", "scale", "--lockers", "x"},
		{"bench", "--workloads", "scale", "--spread", "0"},
	} {
		a, _, stderr := testApp()
		if code := a.main(context.Background(), args); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr)
		}
	}
}
