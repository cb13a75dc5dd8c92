package benchkit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
)

func memoryTarget(t *testing.T, budget int) *ScaleTarget {
	u := "memory://" + t.Name()
	return &ScaleTarget{Name: u, Budget: budget, Open: func(ctx context.Context, opts ...locker.Option) (locker.Locker, error) {
		return locker.Open(ctx, u, opts...)
	}}
}

func TestScale_Memory_MeasuresEveryCurve(t *testing.T) {
	c := NewScaleConfig()
	c.Quick()
	c.Window = 100 * time.Millisecond // refreshes are counted by lockctl's test
	pts, err := Scale(context.Background(), c, []*ScaleTarget{memoryTarget(t, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, p := range pts {
		n[p.Curve]++
		if p.Errors != 0 || p.Skipped != "" || p.OpsPerSec <= 0 || p.P50 <= 0 {
			t.Errorf("%+v: want measured, without errors", p)
		}
		if p.Curve == "waiters-spread" && p.Lockers != min(p.X, c.Spread) {
			t.Errorf("waiters %d spread over %d Lockers, want %d", p.X, p.Lockers, min(p.X, c.Spread))
		}
	}
	if n["held"] != len(c.Held) || n["waiters"] != len(c.Waiters) || n["waiters-spread"] != len(c.Waiters) || n["lockers"] != len(c.Lockers) {
		t.Errorf("points by curve %v", n)
	}
}

func TestScale_Budget_SkipsWhatItCannotHold(t *testing.T) {
	c := NewScaleConfig()
	c.Quick()
	c.Window, c.Lockers = 100*time.Millisecond, []int{1}
	pts, err := Scale(context.Background(), c, []*ScaleTarget{memoryTarget(t, 50)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		over := p.Curve == "held" && p.X > 50
		if got := p.Skipped != ""; got != over {
			t.Errorf("%s %d: skipped %q, want skipped %v", p.Curve, p.X, p.Skipped, over)
		}
	}
}

func TestScaleTargets_FromTheCurves(t *testing.T) {
	ms := time.Millisecond
	pts := []*ScalePoint{
		{Curve: "held", Target: "b", X: 100, P50: 10 * ms, HeapPerLease: 900},
		{Curve: "held", Target: "b", X: 1000, P50: 30 * ms, HeapPerLease: 900},
		{Curve: "held", Target: "b", X: 10000, P50: 11 * ms, HeapPerLease: 1000, GoroutinesPerLease: 1},
		{Curve: "held", Target: "b", X: 100000, Skipped: "budget"},
		{Curve: "waiters", Target: "b", X: 1, P50: ms, P99: 2 * ms},
		{Curve: "waiters", Target: "b", X: 1000, P50: 2 * ms, P99: 2 * ms},
	}
	got := map[string]Check{}
	for _, c := range ScaleTargets(pts) {
		got[c.What] = c
	}
	for what, met := range map[string]bool{
		"client heap per held lease at N = 10000": true,
		"goroutines per held lease at N = 10000":  false,
		"acquire p50 at N = 10000 ÷ N = 100":      true, // 1.1, the N = 1,000 bump aside
		"waiters handoff p50 at W = 1000 ÷ W = 1": false,
		"waiters handoff p99 at W = 1000 ÷ W = 1": true,
	} {
		c, ok := got[what]
		if !ok || c.Met != met {
			t.Errorf("%s: got %+v (present %v), want met %v", what, c, ok, met)
		}
	}
	var b strings.Builder
	ScaleGrowth(pts).WriteText(&b)
	if !strings.Contains(b.String(), "acquire p50 beside N held") {
		t.Errorf("growth table:\n%s", b.String())
	}
}
