package benchkit

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A Chart is one figure written as SVG and PNG.
type Chart struct {
	Title string
	File  string // base name, without extension
}

// chartSet draws, for the subjects of results (all of them, or one group),
// the uncontended latency distribution of every subject and, when the run
// measured handoffs, handoff p50 latency and handoffs/s against W.
func chartSet(dir, slug, title string, results []*Result) ([]Chart, error) {
	var charts []Chart
	unc := byKind(results, KindUncontended)
	if len(unc) > 0 {
		c := Chart{Title: title + ": uncontended acquire+release latency", File: "latency-" + slug}
		p := plot.New()
		p.Title.Text = c.Title
		p.X.Label.Text = "latency (µs, log scale)"
		p.Y.Label.Text = "fraction of operations at or below"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Left, p.Legend.Top = false, false
		p.Add(plotter.NewGrid())
		for i, r := range unc {
			l, err := plotter.NewLine(cdf(r))
			if err != nil {
				return nil, err
			}
			style(l, i, r.Subject)
			p.Add(l)
			p.Legend.Add(r.Subject.Name, l)
		}
		if err := save(p, dir, c.File); err != nil {
			return nil, err
		}
		charts = append(charts, c)
	}
	hand := byKind(results, KindHandoff)
	if len(hand) > 0 {
		series := map[*Subject]plotter.XYs{}
		rate := map[*Subject]plotter.XYs{}
		var order []*Subject
		for _, r := range hand {
			if _, ok := series[r.Subject]; !ok {
				order = append(order, r.Subject)
			}
			if p50 := r.Summary().P50; p50 > 0 {
				series[r.Subject] = append(series[r.Subject], plotter.XY{X: float64(r.Waiters), Y: float64(p50) / 1e3})
			}
			if ops := r.OpsPerSec(); ops > 0 {
				rate[r.Subject] = append(rate[r.Subject], plotter.XY{X: float64(r.Waiters), Y: ops})
			}
		}
		for _, k := range []struct {
			what, file, y string
			data          map[*Subject]plotter.XYs
		}{
			{"handoff latency (release → next holder), p50", "handoff-latency-" + slug, "p50 latency (µs, log scale)", series},
			{"handoffs per second", "handoff-rate-" + slug, "handoffs/s (log scale)", rate},
		} {
			c := Chart{Title: title + ": " + k.what + " against waiters", File: k.file}
			p := plot.New()
			p.Title.Text = c.Title
			p.X.Label.Text = "waiters on one key (log scale)"
			p.Y.Label.Text = k.y
			p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
			p.X.Tick.Marker, p.Y.Tick.Marker = waiterTicks(hand), plot.LogTicks{Prec: -1}
			p.Legend.Left, p.Legend.Top = true, true
			p.Add(plotter.NewGrid())
			for i, s := range order {
				xy := k.data[s]
				if len(xy) == 0 {
					continue
				}
				l, pts, err := plotter.NewLinePoints(xy)
				if err != nil {
					return nil, err
				}
				style(l, i, s)
				pts.Color = l.Color
				pts.Shape = draw.CircleGlyph{}
				p.Add(l, pts)
				p.Legend.Add(s.Name, l, pts)
			}
			if err := save(p, dir, c.File); err != nil {
				return nil, err
			}
			charts = append(charts, c)
		}
	}
	return charts, nil
}

// style gives subject i its colour; floors are dashed, peers dotted.
func style(l *plotter.Line, i int, s *Subject) {
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	switch s.Role {
	case RoleFloor:
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	case RolePeer:
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	}
}

// waiterTicks labels the x axis at the measured numbers of waiters.
func waiterTicks(rs []*Result) plot.Ticker {
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	for _, r := range rs {
		if !seen[r.Waiters] {
			seen[r.Waiters] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.Waiters), Label: fmt.Sprint(r.Waiters)})
		}
	}
	return ticks
}

// cdf samples r's latency distribution at up to 400 points.
func cdf(r *Result) plotter.XYs {
	s := r.Samples()
	n := len(s)
	if n == 0 {
		return nil
	}
	step := max(1, n/400)
	var xy plotter.XYs
	for i := 0; i < n; i += step {
		xy = append(xy, plotter.XY{X: math.Max(float64(s[i])/1e3, 0.001), Y: float64(i+1) / float64(n)})
	}
	if xy[len(xy)-1].Y < 1 {
		xy = append(xy, plotter.XY{X: math.Max(float64(s[n-1])/1e3, 0.001), Y: 1})
	}
	return xy
}

func byKind(results []*Result, kind string) []*Result {
	var out []*Result
	for _, r := range results {
		if r.Kind == kind && r.Subject != nil && r.Summary().N > 0 {
			out = append(out, r)
		}
	}
	return out
}

func save(p *plot.Plot, dir, base string) error {
	widenLog(&p.X)
	widenLog(&p.Y)
	for _, ext := range []string{".svg", ".png"} {
		if err := p.Save(9*vg.Inch, 5.5*vg.Inch, filepath.Join(dir, base+ext)); err != nil {
			return fmt.Errorf("chart %s%s: %w", base, ext, err)
		}
	}
	return nil
}

// widenLog gives a log axis whose data span one value (one number of
// waiters, one subject's rate) a range around it: gonum widens an empty
// range by ±1, which reaches 0 and panics on a log scale.
func widenLog(a *plot.Axis) {
	if _, ok := a.Scale.(plot.LogScale); ok && a.Min == a.Max && a.Min > 0 {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// slug makes a file-name part of s.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
