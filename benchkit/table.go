package benchkit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// A Table is a header row and data rows of cells; the first two columns are
// text, the rest figures.
type Table [][]string

// ResultsTable has a row per workload and subject, rows of one workload
// together so that subjects compare line by line. p50÷floor is the p50
// latency over the group floor's uncontended p50 (uncontended and handoff
// rows); ops÷floor is the throughput over the floor's in the same workload.
func ResultsTable(results []*Result) Table {
	t := Table{{"workload", "subject", "sold", "oversold", "refused", "ops/s", "p50", "p90", "p99", "max", "p50÷floor", "ops÷floor"}}
	for _, r := range results {
		sold, over, refused := "-", "-", "-"
		if r.Sales {
			sold, over = strconv.Itoa(r.Sold), strconv.Itoa(r.Oversold)
			if r.Subject != nil { // the control run has no tokens to refuse
				refused = strconv.Itoa(r.Refused)
			}
		}
		l := r.Summary()
		p50, ops := FloorRatios(results, r)
		rate := fmt.Sprintf("%.0f", r.OpsPerSec())
		if r.Unsupported != "" {
			rate = "unsupported"
		}
		t = append(t, []string{
			r.Workload, r.Backend(), sold, over, refused, rate,
			FmtDuration(l.P50), FmtDuration(l.P90), FmtDuration(l.P99), FmtDuration(l.Max),
			fmtRatio(p50), fmtRatio(ops),
		})
	}
	return t
}

// PeerTable compares our subjects with each peer of their group, workload by
// workload: throughput ours ÷ theirs (above 1: we are faster) and p50
// latency ours ÷ theirs (below 1: we are faster). Nil without peers.
func PeerTable(results []*Result) Table {
	t := Table{{"workload", "ours ÷ peer", "ours ops/s", "peer ops/s", "ops ratio", "ours p50", "peer p50", "p50 ratio"}}
	for _, g := range groups(results) {
		for _, p := range peersIn(results, g) {
			for _, row := range comparableRows(results, g, p) {
				o, th := row[0], row[1]
				or, tr := 0.0, 0.0
				if th.OpsPerSec() > 0 {
					or = o.OpsPerSec() / th.OpsPerSec()
				}
				tr = ratio(o.Summary().P50, th.Summary().P50)
				t = append(t, []string{o.Workload, o.Subject.Name + " ÷ " + p.Name,
					fmt.Sprintf("%.0f", o.OpsPerSec()), fmt.Sprintf("%.0f", th.OpsPerSec()), fmtRatio(or),
					FmtDuration(o.Summary().P50), FmtDuration(th.Summary().P50), fmtRatio(tr)})
			}
		}
	}
	if len(t) == 1 {
		return nil
	}
	return t
}

// TargetsTable lists the checks of Targets; nil when none applied.
func TargetsTable(checks []Check) Table {
	if len(checks) == 0 {
		return nil
	}
	t := Table{{"target", "", "want", "got", "figures"}}
	for _, c := range checks {
		verdict := "met"
		if !c.Met {
			verdict = "MISSED"
		}
		t = append(t, []string{c.What, verdict, c.Want, fmtRatio(c.Got), c.Detail})
	}
	return t
}

// WriteText prints t aligned for a terminal.
func (t Table) WriteText(w io.Writer) {
	if len(t) == 0 {
		return
	}
	widths := make([]int, len(t[0]))
	for _, row := range t {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range t {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < 2 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// WriteMarkdown prints t as a GitHub-flavoured Markdown table.
func (t Table) WriteMarkdown(w io.Writer) {
	if len(t) == 0 {
		return
	}
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for i, row := range t {
		cells := make([]string, len(row))
		for j, c := range row {
			cells[j] = esc(c)
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		if i == 0 {
			seps := make([]string, len(row))
			for j := range seps {
				seps[j] = "---:"
				if j < 2 {
					seps[j] = "---"
				}
			}
			fmt.Fprintln(w, "|"+strings.Join(seps, "|")+"|")
		}
	}
}

func fmtRatio(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// FmtDuration prints d with three significant figures, the precision a
// noisy machine supports.
func FmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// WriteVerdicts states what the flash sale and the semaphore proved, in
// words, and reports whether every safety check held: with the lock,
// nothing oversold, no update lost (the units left and sold add up to the
// stock); never more holders of a semaphore than its permits; and no
// operation failed. A backend without permits is reported, not failed.
func WriteVerdicts(w io.Writer, results []*Result) bool {
	ok := true
	for _, r := range results {
		if r.Errors > 0 {
			ok = false
			fmt.Fprintf(w, "FAIL  %s on %s: %d operations failed, first: %s\n", r.Workload, r.Backend(), r.Errors, r.FirstError)
		}
		if r.Permits > 0 {
			ok = semaphoreVerdict(w, r) && ok
			continue
		}
		if !r.Sales {
			continue
		}
		if r.Subject == nil {
			fmt.Fprintf(w, "without a lock: %d units sold of %d, oversold by %d — what the lock is for\n", r.Sold, r.Stock, r.Oversold)
			continue
		}
		lost := r.Stock - r.Left - r.Sold
		if r.Oversold > 0 || lost != 0 {
			ok = false
			fmt.Fprintf(w, "FAIL  flash sale on %s: %d units sold of %d, oversold by %d, %d lost updates\n", r.Backend(), r.Sold, r.Stock, r.Oversold, lost)
			continue
		}
		fmt.Fprintf(w, "ok    flash sale on %s: %d units sold of %d, none oversold; %d holders paused past their TTL, %d stale accesses refused\n",
			r.Backend(), r.Sold, r.Stock, r.Paused, r.Refused)
	}
	return ok
}

// semaphoreVerdict states what a semaphore run showed and whether the
// limit held.
func semaphoreVerdict(w io.Writer, r *Result) bool {
	switch {
	case r.Unsupported != "":
		fmt.Fprintf(w, "n/a   semaphore on %s: unsupported (%s)\n", r.Backend(), r.Unsupported)
	case r.OverLimit > 0 || r.Peak > r.Permits:
		fmt.Fprintf(w, "FAIL  semaphore on %s: %d holders at once with %d permits; %d of %d grants found more than %d holders\n",
			r.Backend(), r.Peak, r.Permits, r.OverLimit, r.Ops, r.Permits)
		return false
	default:
		fmt.Fprintf(w, "ok    semaphore on %s: at most %d holders at once with %d permits, over %d grants\n", r.Backend(), r.Peak, r.Permits, r.Ops)
	}
	return true
}
