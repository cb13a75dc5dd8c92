package reliability

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
)

// Outcome is one history run under one fault, judged.
type Outcome struct {
	Result *history.Result
	// Injected is how many times the fault was injected during the run.
	Injected int
	// Failed are the violations that count against the backend: all of
	// them for a fault within its guarantee; for a fault outside it, all
	// but mutual-exclusion ones (see Judge).
	Failed []history.Violation
	// Outside counts the mutual-exclusion (linearizability) violations
	// under a fault outside the backend's guarantee: expected, reported,
	// not failed.
	Outside int
	// LivenessRetries counts the liveness check's acquisitions that
	// failed and were tried again within the bound (see livenessClient).
	LivenessRetries int
}

// OK reports whether the run passed: no violation that counts, no unknown
// check, and the nemesis injected and healed without error.
func (o *Outcome) OK() bool {
	r := o.Result
	return len(o.Failed) == 0 && len(r.UnknownKeys) == 0 && r.NemesisErr == nil
}

// RunOptions shape one run; the zero value suits a CI run.
type RunOptions struct {
	// Duration bounds the time clients start operations (default TTL +
	// 1.5 s, at least 2.5 s and the fault's RunFor).
	Duration time.Duration
	// Keys per run (default 3); each key's history is checked on its own.
	Keys int
	// Clients per run (default Slots). Above Slots, clients share the
	// slots' paths in turn, so a client fault cuts off each client of
	// its slot.
	Clients int
	// Seed of the run (0: random).
	Seed uint64
	// Limit, above 1, makes each key an N-permit lock (history.Options.Limit).
	Limit int
	// Elections makes each key an election and each client a candidate
	// (history.Options.Elections).
	Elections bool
}

// PermitsLimit is the limit of the permit runs of a deployment with Permits.
const PermitsLimit = 2

// Run records and checks one history of d's clients while f (nil: no
// fault) is injected again and again. It fails only when the run could not
// be made; the verdict is in the Outcome.
func (d *Deployment) Run(ctx context.Context, f *Fault, o RunOptions) (*Outcome, error) {
	ttl := d.TTL
	if f != nil && f.TTL != 0 {
		ttl = f.TTL
	}
	if o.Duration == 0 {
		o.Duration = max(ttl+1500*time.Millisecond, 2500*time.Millisecond)
		if f != nil {
			o.Duration = max(o.Duration, f.RunFor)
		}
	}
	if o.Keys == 0 {
		o.Keys = 3
	}
	if o.Clients == 0 {
		o.Clients = Slots
	}
	ho := history.Options{
		Clients:   o.Clients,
		Keys:      o.Keys,
		Ops:       1000, // Duration bounds the run
		Duration:  o.Duration,
		TTL:       ttl,
		Seed:      o.Seed,
		Liveness:  d.Liveness,
		Limit:     o.Limit,
		Elections: o.Elections,
	}
	var n *Nemesis
	if f != nil {
		n = &Nemesis{D: d, Fault: *f, TTL: ttl, Seed: o.Seed}
		ho.Nemesis = n
	}
	var made, retries atomic.Int64
	newLocker := func(ctx context.Context) (locker.Locker, error) {
		l, err := d.NewLocker(ctx)
		if err != nil || made.Add(1) <= int64(ho.Clients) {
			return l, err
		}
		return livenessClient{Locker: l, retries: &retries}, nil
	}
	res, err := history.Run(ctx, newLocker, ho)
	if err != nil {
		return nil, err
	}
	out := &Outcome{Result: res, LivenessRetries: int(retries.Load())}
	if n != nil {
		out.Injected = n.Injected()
	}
	out.Failed, out.Outside = Judge(res, f)
	return out, nil
}

// livenessClient is the client of the run's liveness check (history makes
// it after the run's clients, with the same NewLocker). A blocking Acquire
// of it that fails as unavailable, or as lost because the grant came back
// after the lease's own deadline, is tried again until the bound (the
// check's context) ends. Both happen on this loaded machine just after a
// fault heals: Redlock reports ErrUnavailable at once when a majority of
// masters miss its per-node timeout (100 ms at a 1 s TTL), and package
// locker reports a grant slower than the TTL as ErrLeaseLost; neither
// retries. "Acquirable within the bound" is what a caller who retries sees;
// the retries are counted (Outcome.LivenessRetries).
type livenessClient struct {
	locker.Locker
	retries *atomic.Int64
}

func (c livenessClient) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	for {
		lease, err := c.Locker.Acquire(ctx, key, opts...)
		if err == nil || ctx.Err() != nil || !(errors.Is(err, locker.ErrUnavailable) || errors.Is(err, locker.ErrLeaseLost)) {
			return lease, err
		}
		c.retries.Add(1)
		if !wait(ctx, 100*time.Millisecond) {
			return nil, err
		}
	}
}

// Judge splits a run's violations. Within a backend's guarantee every
// violation fails. Under a fault outside it (f.Outside set) the backend
// still claims its fencing properties — tokens unique and increasing, the
// fence's order, exclusive writes and no lost update through the fenced
// resource, and liveness after healing — but not mutual exclusion within
// a holder's deadline: linearizability violations are counted, not failed.
func Judge(res *history.Result, f *Fault) (failed []history.Violation, outside int) {
	for _, v := range res.Violations {
		if f != nil && f.Outside != "" && v.Check == history.CheckLinearizable {
			outside++
			continue
		}
		failed = append(failed, v)
	}
	return failed, outside
}
