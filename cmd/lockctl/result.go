package main

import (
	"math"
	"slices"
	"time"
)

// result is what one workload measured on one backend. Field names and JSON
// tags are what a machine-readable report (results.json) will carry.
type result struct {
	Workload string `json:"workload"`
	Backend  string `json:"backend"` // "" for a run that uses no lock

	// Sales reports whether Sold, Oversold, Refused and Stock apply.
	Sales    bool `json:"sales"`
	Stock    int  `json:"stock,omitempty"`    // units offered
	Sold     int  `json:"sold,omitempty"`     // units buyers were told they got
	Left     int  `json:"left,omitempty"`     // units still in stock at the end
	Oversold int  `json:"oversold,omitempty"` // sold beyond the stock
	Refused  int  `json:"refused,omitempty"`  // writes the fencing guard refused as stale
	Paused   int  `json:"paused,omitempty"`   // holders that stalled past their TTL

	Ops     int           `json:"ops"`     // operations timed
	Elapsed time.Duration `json:"elapsed"` // wall time of the timed part
	Errors  int           `json:"errors"`  // operations that failed
	// FirstError is the first failure, for the message.
	FirstError string `json:"first_error,omitempty"`

	// samples are the latencies of the operations, kept for merging rounds.
	samples []time.Duration
}

// merge adds r's counts and samples to m (nil for the first round).
func (m *result) merge(r *result) *result {
	if m == nil {
		return r
	}
	m.Stock += r.Stock
	m.Sold += r.Sold
	m.Left += r.Left
	m.Oversold += r.Oversold
	m.Refused += r.Refused
	m.Paused += r.Paused
	m.Ops += r.Ops
	m.Elapsed += r.Elapsed
	m.Errors += r.Errors
	if m.FirstError == "" {
		m.FirstError = r.FirstError
	}
	m.samples = append(m.samples, r.samples...)
	return m
}

// opsPerSec is the throughput of the timed part.
func (m *result) opsPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// latency summarises a set of samples.
type latency struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// summary sorts the samples (once) and reads the percentiles off them by the
// nearest-rank method.
func (m *result) summary() latency {
	s := m.samples
	if len(s) == 0 {
		return latency{}
	}
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return latency{N: len(s), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: s[len(s)-1]}
}
