package benchkit

import (
	"fmt"
	"time"
)

// Target thresholds of issue 8, checked by Targets.
const (
	TargetFloorRatio     = 1.15 // ours uncontended p50 ≤ this × the floor's
	TargetPeerRatio      = 1.0  // ours ≥ this × a peer's throughput
	TargetRedsyncHandoff = 10.0 // our Redis handoffs/s ≥ this × redsync's at W = 32
	TargetRedsyncWaiters = 32
)

// find returns the result of kind (and waiters, for handoff) for the subject
// of group and role, or for the named subject when name is not empty.
func find(results []*Result, group string, role Role, kind string, waiters int) []*Result {
	var out []*Result
	for _, r := range results {
		s := r.Subject
		if s == nil || s.Group != group || s.Role != role || r.Kind != kind {
			continue
		}
		if kind == KindHandoff && r.Waiters != waiters {
			continue
		}
		out = append(out, r)
	}
	return out
}

// floorOf returns the floor's result for kind in group, or nil.
func floorOf(results []*Result, group, kind string) *Result {
	if fs := find(results, group, RoleFloor, kind, 0); len(fs) > 0 {
		return fs[0]
	}
	return nil
}

// FloorRatios returns r's uncontended-style ratios to its group's floor:
// p50 ÷ the floor's uncontended p50 (for uncontended and handoff rows),
// and ops/s ÷ the floor's ops/s in the same workload (uncontended and many
// keys). A ratio that does not apply is 0.
func FloorRatios(results []*Result, r *Result) (p50, ops float64) {
	if r.Subject == nil || r.Subject.Role == RoleFloor {
		return 0, 0
	}
	g := r.Subject.Group
	if f := floorOf(results, g, KindUncontended); f != nil && (r.Kind == KindUncontended || r.Kind == KindHandoff) {
		p50 = ratio(r.Summary().P50, f.Summary().P50)
	}
	if r.Kind == KindUncontended || r.Kind == KindManyKeys {
		if f := floorOf(results, g, r.Kind); f != nil && f.OpsPerSec() > 0 {
			ops = r.OpsPerSec() / f.OpsPerSec()
		}
	}
	return p50, ops
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// A Check is one target, met or missed.
type Check struct {
	Group  string  `json:"group"`
	What   string  `json:"what"`
	Want   string  `json:"want"`
	Got    float64 `json:"got"`
	Met    bool    `json:"met"`
	Detail string  `json:"detail"`
}

// Targets checks the results against the targets of issue 8, for whatever
// the run measured: ours ÷ floor uncontended, ours ÷ each peer's throughput
// (uncontended, every handoff W, many keys), and our Redis handoff ÷
// redsync's at W = 32.
func Targets(results []*Result) []Check {
	var checks []Check
	for _, g := range groups(results) {
		for _, o := range find(results, g, RoleOurs, KindUncontended, 0) {
			if f := floorOf(results, g, KindUncontended); f != nil {
				got := ratio(o.Summary().P50, f.Summary().P50)
				checks = append(checks, Check{Group: g, What: o.Subject.Name + ": uncontended p50 ÷ floor (" + f.Subject.Floor + ")",
					Want: fmt.Sprintf("≤ %.2f", TargetFloorRatio), Got: got, Met: got <= TargetFloorRatio,
					Detail: fmt.Sprintf("%s vs %s", FmtDuration(o.Summary().P50), FmtDuration(f.Summary().P50))})
			}
		}
		for _, p := range peersIn(results, g) {
			for _, row := range comparableRows(results, g, p) {
				ours, theirs := row[0], row[1]
				got := 0.0
				if theirs.OpsPerSec() > 0 {
					got = ours.OpsPerSec() / theirs.OpsPerSec()
				}
				want, thr := TargetPeerRatio, fmt.Sprintf("≥ %.1f", TargetPeerRatio)
				if g == "redis" && p.Name == "redsync" && ours.Kind == KindHandoff && ours.Waiters == TargetRedsyncWaiters {
					want, thr = TargetRedsyncHandoff, fmt.Sprintf("≥ %.0f", TargetRedsyncHandoff)
				}
				checks = append(checks, Check{Group: g, What: ours.Workload + ": " + ours.Subject.Name + " ÷ " + p.Name + " ops/s",
					Want: thr, Got: got, Met: got >= want,
					Detail: fmt.Sprintf("%.0f vs %.0f ops/s", ours.OpsPerSec(), theirs.OpsPerSec())})
			}
		}
	}
	return checks
}

// groups lists the groups of the results in first-seen order.
func groups(results []*Result) []string {
	var gs []string
	seen := map[string]bool{}
	for _, r := range results {
		if r.Subject != nil && !seen[r.Subject.Group] {
			seen[r.Subject.Group] = true
			gs = append(gs, r.Subject.Group)
		}
	}
	return gs
}

// peersIn lists the peer subjects of group g.
func peersIn(results []*Result, g string) []*Subject {
	var ps []*Subject
	seen := map[*Subject]bool{}
	for _, r := range results {
		if s := r.Subject; s != nil && s.Group == g && s.Role == RolePeer && !seen[s] {
			seen[s] = true
			ps = append(ps, s)
		}
	}
	return ps
}

// comparableRows pairs each of our results in group g with peer p's result
// of the same workload: uncontended, each handoff W, many keys.
func comparableRows(results []*Result, g string, p *Subject) [][2]*Result {
	var rows [][2]*Result
	for _, o := range results {
		s := o.Subject
		if s == nil || s.Group != g || s.Role != RoleOurs || o.Kind == KindFlashSale {
			continue
		}
		for _, t := range results {
			if t.Subject == p && t.Kind == o.Kind && t.Waiters == o.Waiters {
				rows = append(rows, [2]*Result{o, t})
			}
		}
	}
	return rows
}
