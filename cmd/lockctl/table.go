package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// writeTable prints results as one aligned table, a row per workload and
// backend, rows of one workload together so backends compare line by line.
func writeTable(w io.Writer, results []*result) {
	rows := [][]string{{"workload", "backend", "sold", "oversold", "refused", "ops/s", "p50", "p99", "max"}}
	for _, r := range results {
		backend := r.Backend
		if backend == "" {
			backend = "-"
		}
		sold, over, refused := "-", "-", "-"
		if r.Sales {
			sold, over = strconv.Itoa(r.Sold), strconv.Itoa(r.Oversold)
			if r.Backend != "" { // the control run has no tokens to refuse
				refused = strconv.Itoa(r.Refused)
			}
		}
		l := r.summary()
		rows = append(rows, []string{
			r.Workload, backend, sold, over, refused,
			fmt.Sprintf("%.0f", r.opsPerSec()),
			fmtDuration(l.P50), fmtDuration(l.P99), fmtDuration(l.Max),
		})
	}
	// The first two columns are text and align left; the figures align right.
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range rows {
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

// fmtDuration prints d with three significant figures, the precision a noisy
// machine supports.
func fmtDuration(d time.Duration) string {
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

// writeVerdicts states what the flash sale proved, in words, and reports
// whether every safety check held: with the lock, nothing oversold, no update
// lost (the units left and sold add up to the stock), and no operation failed.
func writeVerdicts(w io.Writer, results []*result) bool {
	ok := true
	for _, r := range results {
		if r.Errors > 0 {
			ok = false
			fmt.Fprintf(w, "FAIL  %s on %s: %d operations failed, first: %s\n", r.Workload, r.Backend, r.Errors, r.FirstError)
		}
		if !r.Sales {
			continue
		}
		if r.Backend == "" {
			fmt.Fprintf(w, "without a lock: %d units sold of %d, oversold by %d — what the lock is for\n", r.Sold, r.Stock, r.Oversold)
			continue
		}
		lost := r.Stock - r.Left - r.Sold
		if r.Oversold > 0 || lost != 0 {
			ok = false
			fmt.Fprintf(w, "FAIL  flash sale on %s: %d units sold of %d, oversold by %d, %d lost updates\n", r.Backend, r.Sold, r.Stock, r.Oversold, lost)
			continue
		}
		fmt.Fprintf(w, "ok    flash sale on %s: %d units sold of %d, none oversold; %d holders paused past their TTL, %d stale accesses refused\n",
			r.Backend, r.Sold, r.Stock, r.Paused, r.Refused)
	}
	return ok
}
