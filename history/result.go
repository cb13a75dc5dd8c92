package history

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckName names one of the checks a history must pass.
type CheckName string

// The checks. Each Violation says which one failed.
const (
	// CheckLinearizable: the key's lock operations and writes are
	// linearizable against the fenced-mutex model (see the package doc).
	CheckLinearizable CheckName = "linearizable"
	// CheckTokens: every successful acquisition of a key got a token > 0
	// that no other acquisition got, larger than the token of every
	// acquisition that returned before it was called.
	CheckTokens CheckName = "tokens"
	// CheckFenceOrder: the resource admitted no write with a token lower
	// than one it had already admitted.
	CheckFenceOrder CheckName = "fence-order"
	// CheckExclusive: no step of another write landed between the two
	// steps of an acknowledged write.
	CheckExclusive CheckName = "exclusive-writes"
	// CheckLostUpdate: the resource's final value counts every
	// acknowledged update.
	CheckLostUpdate CheckName = "lost-update"
	// CheckLiveness: after the run (and the nemesis's healing), every key
	// was acquirable again within Options.Liveness.
	CheckLiveness CheckName = "liveness"
)

// Violation is one failed check.
type Violation struct {
	Check  CheckName
	Key    string
	Detail string
	// Ops is the smallest failing history found: for CheckLinearizable, a
	// subset of the key's operations that is still not linearizable; for
	// the other checks, the operations involved.
	Ops []Op
}

// String formats the violation with its failing history, one operation a
// line.
func (v Violation) String() string {
	s := fmt.Sprintf("%s violated on key %q: %s", v.Check, v.Key, v.Detail)
	if len(v.Ops) > 0 {
		s += "\n" + FormatOps(v.Ops)
	}
	return s
}

// Counts are the figures of one run or, added up, of many.
type Counts struct {
	Runs               int // runs added up
	Histories          int // key histories checked
	Contended          int // of them, histories in which three of the run's clients or more operated
	Operations         int // operations recorded
	Acquisitions       int // successful acquisitions
	Writes             int // updates acknowledged by the resource
	StaleWritesRefused int // write steps the guard refused as stale
	Ambiguous          int // operations of unknown outcome
	Violations         int // failed checks
	Unknown            int // linearizability checks that ran out of time
}

// Add adds c2 to c.
func (c *Counts) Add(c2 Counts) {
	c.Runs += c2.Runs
	c.Histories += c2.Histories
	c.Contended += c2.Contended
	c.Operations += c2.Operations
	c.Acquisitions += c2.Acquisitions
	c.Writes += c2.Writes
	c.StaleWritesRefused += c2.StaleWritesRefused
	c.Ambiguous += c2.Ambiguous
	c.Violations += c2.Violations
	c.Unknown += c2.Unknown
}

// String formats the figures on one line.
func (c Counts) String() string {
	return fmt.Sprintf("%d histories, %d operations, %d acquisitions, %d writes, %d stale writes refused, %d ambiguous, %d violations, %d unknown checks",
		c.Histories, c.Operations, c.Acquisitions, c.Writes, c.StaleWritesRefused, c.Ambiguous, c.Violations, c.Unknown)
}

// Result is the outcome of one run.
type Result struct {
	Counts     Counts
	Seed       uint64
	Duration   time.Duration
	Keys       []string
	Violations []Violation
	// UnknownKeys are the keys whose linearizability check ran out of time.
	UnknownKeys []string
	// Windows are the pauses of clients and the faults of the nemesis.
	Windows []Window
	// NemesisErr is what the nemesis returned, if it failed.
	NemesisErr error
	// Ops is the whole history, in call order.
	Ops []Op
	// LivenessSlowest is the longest step of the liveness check (making
	// its client, or one acquisition), each bounded by LivenessBound
	// (Options.Liveness; 0 when the check did not run): how close the
	// check came to failing.
	LivenessSlowest, LivenessBound time.Duration

	limit int // Options.Limit: the model the history is checked against
}

// model is the model r's history is checked against: the fenced mutex, or
// N permits.
func (r *Result) model() porcupine.Model {
	if r.limit > 1 {
		return permitsModel(r.limit)
	}
	return model
}

// OK reports whether every check passed: no violation, no unknown check,
// and the nemesis did not fail.
func (r *Result) OK() bool {
	return len(r.Violations) == 0 && len(r.UnknownKeys) == 0 && r.NemesisErr == nil
}

// Caught reports whether some violation is of check c.
func (r *Result) Caught(c CheckName) bool {
	return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Check == c })
}

// String summarises the run and lists every violation with its history.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %v: %v", r.Seed, r.Duration.Round(time.Millisecond), r.Counts)
	for _, k := range r.UnknownKeys {
		fmt.Fprintf(&b, "\nlinearizability check of key %q ran out of time: unknown, not passed", k)
	}
	if r.NemesisErr != nil {
		fmt.Fprintf(&b, "\nnemesis failed: %v", r.NemesisErr)
	}
	for _, v := range r.Violations {
		b.WriteString("\n")
		b.WriteString(v.String())
	}
	return b.String()
}

// WriteVisualization writes porcupine's HTML visualisation of the whole
// history — every key, with the clients' pauses and the nemesis's faults
// drawn as annotations — to a new file in dir, and returns its path. For a
// key that is not linearizable it shows the longest partial
// linearizations and where they fail.
func (r *Result) WriteVisualization(dir string, timeout time.Duration) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	res, info := porcupine.CheckOperationsVerbose(r.model(), operations(r.Ops), timeout)
	var notes []porcupine.Annotation
	for _, w := range r.Windows {
		a := porcupine.Annotation{Start: int64(w.Start), End: int64(w.End), Description: w.Name,
			Details: fmt.Sprintf("%s from %s to %s", w.Name, ms(w.Start), ms(w.End))}
		if w.Client >= 0 {
			a.ClientId = w.Client
			a.BackgroundColor = "#fde2c8"
		} else {
			a.Tag = "nemesis"
			a.BackgroundColor = "#f8c4c4"
		}
		notes = append(notes, a)
	}
	info.AddAnnotations(notes)
	path := filepath.Join(dir, fmt.Sprintf("history-%d-%s-%s.html", r.Seed, strings.ToLower(string(res)), time.Now().Format("20060102T150405.000")))
	if err := porcupine.VisualizePath(r.model(), info, path); err != nil {
		return "", err
	}
	return path, nil
}
