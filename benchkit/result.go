package benchkit

import (
	"encoding/json"
	"math"
	"slices"
	"time"
)

// Workload kinds, as results.json names them.
const (
	KindFlashSale         = "flash-sale"
	KindFlashSaleUnlocked = "flash-sale-unlocked"
	KindUncontended       = "uncontended"
	KindHandoff           = "handoff"
	KindManyKeys          = "many-keys"
	KindSemaphore         = "semaphore"
	// KindScale is the cost curves (see Scale); it runs alone and is not
	// in AllKinds.
	KindScale = "scale"
)

// Result is what one workload measured on one subject, merged over rounds.
type Result struct {
	Workload string   `json:"workload"` // the row label: "handoff, 32 waiters"
	Kind     string   `json:"kind"`     // one of the Kind constants
	Waiters  int      `json:"waiters,omitempty"`
	Subject  *Subject `json:"subject,omitempty"` // nil for a run that uses no lock

	// Sales reports whether the flash-sale fields apply.
	Sales    bool `json:"sales"`
	Stock    int  `json:"stock,omitempty"`    // units offered
	Sold     int  `json:"sold,omitempty"`     // units buyers were told they got
	Left     int  `json:"left,omitempty"`     // units still in stock at the end
	Oversold int  `json:"oversold,omitempty"` // sold beyond the stock
	Refused  int  `json:"refused,omitempty"`  // accesses the fencing guard refused as stale
	Paused   int  `json:"paused,omitempty"`   // holders that stalled past their TTL
	Requeued int  `json:"requeued,omitempty"` // buyers whose lease was lost before they were done, who queued again

	// Permits, above 0, marks a semaphore run: the key's limit of holders.
	Permits   int `json:"permits,omitempty"`
	Peak      int `json:"peak_holders,omitempty"` // most holders counted at once
	OverLimit int `json:"over_limit,omitempty"`   // grants that found more than Permits holders
	// Unsupported is the backend's refusal of permits (ErrUnsupported);
	// the run then measured nothing and did not fail.
	Unsupported string `json:"unsupported,omitempty"`

	Ops     int           `json:"ops"`     // operations timed
	Elapsed time.Duration `json:"elapsed"` // wall time of the timed part
	Errors  int           `json:"errors"`  // operations that failed
	// FirstError is the first failure, for the message.
	FirstError string `json:"first_error,omitempty"`

	// Rounds holds each round's own figures, to show the spread.
	Rounds []RoundFigure `json:"rounds,omitempty"`

	// samples are the latencies of the operations, kept for merging rounds.
	samples []time.Duration
	// grants counts every grant of a handoff run, timed or not: the W
	// waiters' last grants after the n timed ones too.
	grants int
}

// RoundFigure is one round's throughput and median latency.
type RoundFigure struct {
	OpsPerSec float64       `json:"ops_per_sec"`
	P50       time.Duration `json:"p50"`
}

// Backend is the subject's name, or "-" for a run without a lock.
func (r *Result) Backend() string {
	if r.Subject == nil {
		return "-"
	}
	return r.Subject.Name
}

// merge adds r's counts and samples to m (nil for the first round).
func (m *Result) merge(r *Result) *Result {
	r.Rounds = []RoundFigure{{OpsPerSec: r.OpsPerSec(), P50: r.Summary().P50}}
	if m == nil {
		return r
	}
	m.Stock += r.Stock
	m.Sold += r.Sold
	m.Left += r.Left
	m.Oversold += r.Oversold
	m.Refused += r.Refused
	m.Paused += r.Paused
	m.Requeued += r.Requeued
	m.Peak = max(m.Peak, r.Peak)
	m.OverLimit += r.OverLimit
	if m.Unsupported == "" {
		m.Unsupported = r.Unsupported
	}
	m.Ops += r.Ops
	m.Elapsed += r.Elapsed
	m.Errors += r.Errors
	if m.FirstError == "" {
		m.FirstError = r.FirstError
	}
	m.samples = append(m.samples, r.samples...)
	m.Rounds = append(m.Rounds, r.Rounds...)
	return m
}

// OpsPerSec is the throughput of the timed part.
func (m *Result) OpsPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// Latency summarises a set of samples.
type Latency struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// Summary sorts the samples (once) and reads the percentiles off them by the
// nearest-rank method.
func (m *Result) Summary() Latency {
	s := m.samples
	if len(s) == 0 {
		return Latency{}
	}
	slices.Sort(s)
	return Latency{N: len(s), P50: rank(s, 0.50), P90: rank(s, 0.90), P99: rank(s, 0.99), Max: s[len(s)-1]}
}

// rank is the nearest-rank percentile p of sorted samples s.
func rank(s []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Samples returns the latency samples, sorted.
func (m *Result) Samples() []time.Duration {
	slices.Sort(m.samples)
	return m.samples
}

// MarshalJSON adds the summary (in µs) and throughput to the stored fields.
func (m *Result) MarshalJSON() ([]byte, error) {
	type plain Result
	l := m.Summary()
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return json.Marshal(struct {
		*plain
		OpsPerSec float64 `json:"ops_per_sec"`
		Samples   int     `json:"samples"`
		P50us     float64 `json:"p50_us"`
		P90us     float64 `json:"p90_us"`
		P99us     float64 `json:"p99_us"`
		MaxUs     float64 `json:"max_us"`
	}{(*plain)(m), m.OpsPerSec(), l.N, us(l.P50), us(l.P90), us(l.P99), us(l.Max)})
}
