package benchkit

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

// ScaleReport is what a scale run writes to its --out directory.
type ScaleReport struct {
	Title    string        `json:"title"`
	Command  string        `json:"command"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Machine  Machine       `json:"machine"`
	Servers  []Server      `json:"servers,omitempty"`
	Config   *ScaleConfig  `json:"config"`
	Points   []*ScalePoint `json:"points"`
	Targets  []Check       `json:"targets,omitempty"`
	Charts   []Chart       `json:"charts,omitempty"`
}

// ScaleTables returns one table per curve, in the order the curves run;
// curves without points are left out.
func ScaleTables(pts []*ScalePoint) []Table {
	held := Table{{"held N", "backend", "heap/lease", "stack/lease", "goroutines/lease", "server/lock", "server counts/lock", "refresh/s", "client CPU", "acquire p50", "p99", "taken/s", "errors"}}
	wait := Table{{"waiters W", "backend", "Lockers", "handoff p50", "p99", "handoffs/s", "server CPU/handoff", "errors"}}
	lock := Table{{"Lockers L", "backend", "ops/s", "p50", "p99", "server CPU/op", "errors"}}
	for _, p := range pts {
		x := fmt.Sprint(p.X)
		if p.Skipped != "" {
			row := []string{x, p.Target, "skipped: " + p.Skipped}
			switch p.Curve {
			case "held":
				held = append(held, pad(row, len(held[0])))
			case "lockers":
				lock = append(lock, pad(row, len(lock[0])))
			default:
				wait = append(wait, pad(row, len(wait[0])))
			}
			continue
		}
		errs := fmt.Sprint(p.Errors)
		switch p.Curve {
		case "held":
			held = append(held, []string{x, p.Target, fmtBytes(p.HeapPerLease), fmtBytes(p.StackPerLease), fmt.Sprintf("%.2f", p.GoroutinesPerLease),
				fmtBytes(p.ServerPerLock), fmtDetail(p.DetailPerLock), fmt.Sprintf("%.0f", p.RefreshPerSec), fmt.Sprintf("%.1f%%", 100*p.ClientCPU), FmtDuration(p.P50), FmtDuration(p.P99),
				fmt.Sprintf("%.0f", p.OpsPerSec), errs})
		case "waiters", "waiters-spread":
			wait = append(wait, []string{x, p.Target, fmt.Sprint(p.Lockers), FmtDuration(p.P50), FmtDuration(p.P99), fmt.Sprintf("%.0f", p.OpsPerSec), fmtCPU(p.CPUPerOp), errs})
		case "lockers":
			lock = append(lock, []string{x, p.Target, fmt.Sprintf("%.0f", p.OpsPerSec), FmtDuration(p.P50), FmtDuration(p.P99), fmtCPU(p.CPUPerOp), errs})
		}
	}
	var out []Table
	for _, t := range []Table{held, wait, lock} {
		if len(t) > 1 {
			out = append(out, t)
		}
	}
	return out
}

func pad(row []string, n int) []string {
	for len(row) < n {
		row = append(row, "")
	}
	return row
}

func fmtBytes(v float64) string {
	switch {
	case v == 0:
		return "-"
	case math.Abs(v) >= 10<<10:
		return fmt.Sprintf("%.0f KiB", v/1024)
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// fmtDetail lists a point's server counts per lock, by name.
func fmtDetail(d map[string]float64) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if d[k] != 0 {
			out = append(out, fmt.Sprintf("%s %.2f", k, d[k]))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

func fmtCPU(s float64) string {
	if s <= 0 {
		return "-"
	}
	return FmtDuration(time.Duration(s * 1e9))
}

// ScaleTargets checks the points against issue 22's targets, where the run
// measured both ends: client heap ≤ 2 KiB and no goroutine per held lease
// at the largest N; acquire p50 at N = 10⁴ within 1.2 × N = 10²'s (or, where
// those were not both measured, the largest N against the smallest);
// handoff p50 and p99 at the largest W within 1.5 × W = 1.
func ScaleTargets(pts []*ScalePoint) []Check {
	var out []Check
	for _, target := range scaleTargetNames(pts) {
		held := curve(pts, target, "held")
		if len(held) > 0 {
			last := held[len(held)-1]
			out = append(out,
				Check{Group: target, What: fmt.Sprintf("client heap per held lease at N = %d", last.X), Want: "≤ 2048 B",
					Got: last.HeapPerLease, Met: last.HeapPerLease <= 2048, Detail: fmtBytes(last.HeapPerLease)},
				Check{Group: target, What: fmt.Sprintf("goroutines per held lease at N = %d", last.X), Want: "≈ 0 (< 0.01)",
					Got: last.GoroutinesPerLease, Met: last.GoroutinesPerLease < 0.01, Detail: fmt.Sprintf("%.3f", last.GoroutinesPerLease)})
		}
		if a, b, ok := pointsAt(held, 100, 10000); ok && a.P50 > 0 {
			r := ratio(b.P50, a.P50)
			out = append(out, Check{Group: target, What: fmt.Sprintf("acquire p50 at N = %d ÷ N = %d", b.X, a.X), Want: "≤ 1.2",
				Got: r, Met: r <= 1.2, Detail: FmtDuration(b.P50) + " ÷ " + FmtDuration(a.P50)})
		}
		for _, c := range []string{"waiters", "waiters-spread"} {
			a, b, ok := ends(curve(pts, target, c))
			if !ok || a.X != 1 || a.P50 <= 0 {
				continue
			}
			for _, q := range []struct {
				name   string
				hi, lo time.Duration
			}{{"p50", b.P50, a.P50}, {"p99", b.P99, a.P99}} {
				r := ratio(q.hi, q.lo)
				out = append(out, Check{Group: target, What: fmt.Sprintf("%s handoff %s at W = %d ÷ W = 1", c, q.name, b.X), Want: "≤ 1.5",
					Got: r, Met: r <= 1.5, Detail: FmtDuration(q.hi) + " ÷ " + FmtDuration(q.lo)})
			}
		}
	}
	return out
}

// ScaleTargetsTable lists the checks with the backend they are of.
func ScaleTargetsTable(checks []Check) Table {
	t := TargetsTable(checks)
	if t == nil {
		return nil
	}
	t[0] = append([]string{"backend"}, t[0]...)
	for i, c := range checks {
		t[i+1] = append([]string{c.Group}, t[i+1]...)
	}
	return t
}

// ScaleGrowth is the "what grows with what" table: for each backend and
// figure, its value at the smallest and the largest size measured and their
// ratio.
func ScaleGrowth(pts []*ScalePoint) Table {
	t := Table{{"backend", "figure", "from", "to", "at from", "at to", "to ÷ from"}}
	for _, target := range scaleTargetNames(pts) {
		for _, f := range []struct {
			curve, what string
			get         func(*ScalePoint) float64
			show        func(float64) string
		}{
			{"held", "client heap per lease (N)", func(p *ScalePoint) float64 { return p.HeapPerLease }, fmtBytes},
			{"held", "client goroutine stacks per lease (N)", func(p *ScalePoint) float64 { return p.StackPerLease }, fmtBytes},
			{"held", "goroutines per lease (N)", func(p *ScalePoint) float64 { return p.GoroutinesPerLease }, func(v float64) string { return fmt.Sprintf("%.2f", v) }},
			{"held", "server memory per lock (N)", func(p *ScalePoint) float64 { return p.ServerPerLock }, fmtBytes},
			{"held", "refreshes/s (N)", func(p *ScalePoint) float64 { return p.RefreshPerSec }, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
			{"held", "client CPU while holding N (share of one CPU)", func(p *ScalePoint) float64 { return p.ClientCPU }, func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }},
			{"held", "acquire p50 beside N held", func(p *ScalePoint) float64 { return float64(p.P50) }, durf},
			{"waiters", "handoff p50, one Locker (W)", func(p *ScalePoint) float64 { return float64(p.P50) }, durf},
			{"waiters", "handoff p99, one Locker (W)", func(p *ScalePoint) float64 { return float64(p.P99) }, durf},
			{"waiters-spread", "handoff p50, spread (W)", func(p *ScalePoint) float64 { return float64(p.P50) }, durf},
			{"waiters-spread", "handoff p99, spread (W)", func(p *ScalePoint) float64 { return float64(p.P99) }, durf},
			{"waiters", "server CPU per handoff (W)", func(p *ScalePoint) float64 { return p.CPUPerOp }, fmtCPU},
			{"lockers", "throughput (L)", func(p *ScalePoint) float64 { return p.OpsPerSec }, func(v float64) string { return fmt.Sprintf("%.0f/s", v) }},
		} {
			a, b, ok := ends(curve(pts, target, f.curve))
			if !ok || f.get(a) == 0 && f.get(b) == 0 {
				continue
			}
			r := "-"
			if f.get(a) > 0 {
				r = fmt.Sprintf("%.2f", f.get(b)/f.get(a))
			}
			t = append(t, []string{target, f.what, fmt.Sprint(a.X), fmt.Sprint(b.X), f.show(f.get(a)), f.show(f.get(b)), r})
		}
		if a, b, ok := ends(curve(pts, target, "held")); ok {
			for _, k := range slices.Sorted(maps.Keys(b.DetailPerLock)) {
				x, y := a.DetailPerLock[k], b.DetailPerLock[k]
				if x == 0 && y == 0 {
					continue
				}
				r := "-"
				if x > 0 {
					r = fmt.Sprintf("%.2f", y/x)
				}
				t = append(t, []string{target, "server " + k + " per lock (N)", fmt.Sprint(a.X), fmt.Sprint(b.X), fmt.Sprintf("%.2f", x), fmt.Sprintf("%.2f", y), r})
			}
		}
	}
	return t
}

func durf(v float64) string { return FmtDuration(time.Duration(v)) }

// curve returns target's measured points of one curve, by X.
func curve(pts []*ScalePoint, target, name string) []*ScalePoint {
	var out []*ScalePoint
	for _, p := range pts {
		if p.Target == target && p.Curve == name && p.Skipped == "" && p.Errors == 0 {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *ScalePoint) int { return a.X - b.X })
	return out
}

// pointsAt returns the points at x and y, or else the ends of pts.
func pointsAt(pts []*ScalePoint, x, y int) (a, b *ScalePoint, ok bool) {
	i := slices.IndexFunc(pts, func(p *ScalePoint) bool { return p.X == x })
	j := slices.IndexFunc(pts, func(p *ScalePoint) bool { return p.X == y })
	if i >= 0 && j >= 0 {
		return pts[i], pts[j], true
	}
	return ends(pts)
}

// ends returns the first and last of at least two points.
func ends(pts []*ScalePoint) (a, b *ScalePoint, ok bool) {
	if len(pts) < 2 {
		return nil, nil, false
	}
	return pts[0], pts[len(pts)-1], true
}

func scaleTargetNames(pts []*ScalePoint) []string {
	var out []string
	for _, p := range pts {
		if !slices.Contains(out, p.Target) {
			out = append(out, p.Target)
		}
	}
	return out
}

// Write writes report.md, scale.json and the charts into dir.
func (r *ScaleReport) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.Machine.LoadEnd == "" {
		r.Machine.LoadEnd = loadAvg()
	}
	if r.Targets == nil {
		r.Targets = ScaleTargets(r.Points)
	}
	cs, err := scaleCharts(dir, r.Points)
	if err != nil {
		return err
	}
	r.Charts = cs
	return writeFiles(dir, "scale.json", r, r.Markdown())
}

// Markdown renders the report.
func (r *ScaleReport) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", r.Title)
	fmt.Fprintf(&b, "Produced on %s (%s to %s) by:\n\n```\n%s\n```\n\n",
		r.Started.UTC().Format("2006-01-02"), r.Started.UTC().Format("15:04:05Z"), r.Finished.UTC().Format("15:04:05Z"), r.Command)
	m := r.Machine
	fmt.Fprintf(&b, "- CPU: %s, %d logical CPUs; memory %s; %s; %s\n", m.CPU, m.NumCPU, m.Memory, m.OS, m.Go)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s; at the end: %s\n", m.LoadStart, m.LoadEnd)
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "- %s %s\n", s.Name, s.Version)
	}
	c := r.Config
	fmt.Fprintf(&b, "\nSizes: held N = %s (TTL %v, auto-refresh on, refreshes counted over %v; acquire+release timed %d times beside them); "+
		"waiters W = %s on one key, in one Locker and over %d, %d handoffs each; Lockers L = %s, %d acquire+release pairs each on keys of their own.\n\n",
		joinInts(c.Held), c.TTL, c.window(), c.Probe, joinInts(c.Waiters), c.Spread, c.Handoffs, joinInts(c.Lockers), c.Ops)
	b.WriteString("Client heap is the live heap after a full collection, before and after taking the N leases (for memory://, the server's state is in that heap too). Server memory is the server's own measure, named per backend in `server_measure` of scale.json.\n\n")
	for _, t := range ScaleTables(r.Points) {
		t.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	b.WriteString("## What grows with what\n\n")
	ScaleGrowth(r.Points).WriteMarkdown(&b)
	if t := ScaleTargetsTable(r.Targets); t != nil {
		b.WriteString("\n## Targets\n\n")
		t.WriteMarkdown(&b)
	}
	if len(r.Charts) > 0 {
		b.WriteString("\n## Charts\n\n")
		for _, ch := range r.Charts {
			fmt.Fprintf(&b, "![%s](%s.svg)\n\n", ch.Title, ch.File)
		}
	}
	return b.Bytes()
}

// scaleCharts draws the curves, log-log (goroutines per lease: log x,
// linear y, so that zero shows); points that are not positive on a log
// axis are left out.
func scaleCharts(dir string, pts []*ScalePoint) ([]Chart, error) {
	type metric struct {
		curves  []string
		file    string
		title   string
		x, y    string
		get     func(*ScalePoint) float64
		linearY bool
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var charts []Chart
	for _, m := range []metric{
		{[]string{"held"}, "heap-per-lease", "client heap per held lease", "held leases N", "bytes per lease", func(p *ScalePoint) float64 { return p.HeapPerLease }, false},
		{[]string{"held"}, "stack-per-lease", "client goroutine stacks per held lease", "held leases N", "bytes per lease", func(p *ScalePoint) float64 { return p.StackPerLease }, false},
		{[]string{"held"}, "goroutines-per-lease", "goroutines per held lease", "held leases N", "goroutines per lease", func(p *ScalePoint) float64 { return p.GoroutinesPerLease }, true},
		{[]string{"held"}, "server-per-lock", "server memory per held lock", "held leases N", "bytes per lock", func(p *ScalePoint) float64 { return p.ServerPerLock }, false},
		{[]string{"held"}, "refresh-rate", "refreshes per second while holding N", "held leases N", "refreshes/s", func(p *ScalePoint) float64 { return p.RefreshPerSec }, false},
		{[]string{"held"}, "client-cpu", "client CPU while holding N (refreshes)", "held leases N", "CPU seconds per second", func(p *ScalePoint) float64 { return p.ClientCPU }, false},
		{[]string{"held"}, "acquire-p50", "acquire+release p50 beside N held", "held leases N", "p50 (µs)", func(p *ScalePoint) float64 { return us(p.P50) }, false},
		{[]string{"waiters", "waiters-spread"}, "handoff-p50", "handoff p50 against waiters", "waiters W", "p50 (µs)", func(p *ScalePoint) float64 { return us(p.P50) }, false},
		{[]string{"waiters", "waiters-spread"}, "handoff-p99", "handoff p99 against waiters", "waiters W", "p99 (µs)", func(p *ScalePoint) float64 { return us(p.P99) }, false},
		{[]string{"lockers"}, "lockers-throughput", "acquire+release throughput against Lockers", "Lockers L", "pairs/s", func(p *ScalePoint) float64 { return p.OpsPerSec }, false},
	} {
		p := plot.New()
		p.Title.Text = "scale: " + m.title
		p.X.Label.Text = m.x + " (log scale)"
		p.Y.Label.Text = m.y
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, xTicks(pts, m.curves)
		if !m.linearY {
			p.Y.Label.Text += " (log scale)"
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, labelledLogTicks{}
		}
		p.Legend.Left, p.Legend.Top = true, true
		p.Add(plotter.NewGrid())
		i, drawn := 0, false
		for _, target := range scaleTargetNames(pts) {
			for _, cv := range m.curves {
				var xy plotter.XYs
				for _, pt := range curve(pts, target, cv) {
					if y := m.get(pt); y > 0 || m.linearY {
						xy = append(xy, plotter.XY{X: float64(pt.X), Y: y})
					}
				}
				if len(xy) == 0 {
					continue
				}
				l, dots, err := plotter.NewLinePoints(xy)
				if err != nil {
					return nil, err
				}
				style(l, i, &Subject{Role: RoleOurs})
				if cv == "waiters-spread" {
					style(l, i, &Subject{Role: RolePeer}) // dotted
				}
				dots.Color, dots.Shape = l.Color, draw.CircleGlyph{}
				p.Add(l, dots)
				name := target
				if len(m.curves) > 1 {
					name += map[string]string{"waiters": " (one Locker)", "waiters-spread": " (spread)"}[cv]
				}
				p.Legend.Add(name, l, dots)
				drawn = true
				if cv == m.curves[len(m.curves)-1] {
					i++
				}
			}
		}
		if !drawn {
			continue
		}
		c := Chart{Title: p.Title.Text, File: "scale-" + m.file}
		if err := save(p, dir, c.File); err != nil {
			return nil, err
		}
		charts = append(charts, c)
	}
	return charts, nil
}

// xTicks labels the x axis at the sizes measured in the curves.
func xTicks(pts []*ScalePoint, curves []string) plot.Ticker {
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	for _, p := range pts {
		if slices.Contains(curves, p.Curve) && !seen[p.X] {
			seen[p.X] = true
			ticks = append(ticks, plot.Tick{Value: float64(p.X), Label: fmt.Sprint(p.X)})
		}
	}
	return ticks
}

// labelledLogTicks marks 1 … 9 of every decade and labels 1, 2 and 5, or
// every mark when fewer than two of those fall on the axis, so that an axis
// spanning less than a decade still has numbers on it.
type labelledLogTicks struct{}

func (labelledLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	labels := 0
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				labels++
			}
			ticks = append(ticks, t)
		}
	}
	if labels < 2 {
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 3, 64)
		}
	}
	return ticks
}
