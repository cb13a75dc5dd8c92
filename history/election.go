package history

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/election"
)

// Elections (Options.Elections): every key is an election, every client a
// candidate. A term refreshes itself in the background, so its refreshes
// are not operations the client makes; they are observed instead, through
// the lease under the term (captured by a Locker wrapper, since a Term does
// not show its lease's deadline). A refresh that moved the deadline to D
// was sent at D − TTL + drift margin (TTL as granted) and returned before
// the client saw D: it is recorded as a Refresh over [D − TTL, seen], which
// contains its real interval — so the fenced-mutex model, and its
// linearizability check, stay sound. Refreshes seen late only make the
// model's bound on the holder shorter, which can hide a violation, never
// invent one.

// capture is a candidate's Locker as the election sees it: it keeps the
// lease of the last acquisition, which is the lease of the term Campaign
// returns (a client campaigns for one term at a time).
type capture struct {
	locker.Locker
	mu   sync.Mutex
	last locker.Lease
}

func (c *capture) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	lease, err := c.Locker.Acquire(ctx, key, opts...)
	if err == nil {
		c.mu.Lock()
		c.last = lease
		c.mu.Unlock()
	}
	return lease, err
}

func (c *capture) lease() locker.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// leading is a term a candidate holds, as the runner tracks it.
type leading struct {
	*held
	term *election.Term
	seen time.Time // the deadline last recorded
}

// candidate runs one client's campaigns, bounded as client is.
func (r *runner) candidate(ctx context.Context, id int, l locker.Locker) {
	rng := mrand.New(mrand.NewPCG(r.o.Seed, uint64(id)))
	c := &capture{Locker: l}
	stop := r.start.Add(r.o.Duration)
	for n := 0; n < r.o.Ops && time.Now().Before(stop) && ctx.Err() == nil; {
		key := r.keys[rng.IntN(len(r.keys))]
		// From well under a TTL (runs out behind a leader) to three.
		timeout := r.o.TTL/4 + jitter(rng, 3*r.o.TTL)
		t := r.campaign(ctx, id, c, key, timeout)
		n++
		if t == nil {
			sleep(ctx, jitter(rng, r.o.TTL/8))
			continue
		}
		n += r.lead(ctx, id, t, rng)
	}
}

// campaign campaigns for key on a fresh Election and records it as an
// acquisition.
func (r *runner) campaign(ctx context.Context, id int, c *capture, key string, timeout time.Duration) *leading {
	op := Op{Client: id, Key: key, Kind: Acquire}
	e, err := election.New(c, key, election.WithTTL(r.o.TTL))
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		r.record(op)
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	op.Call = r.now()
	t, err := e.Campaign(cctx, "")
	op.Return = r.now()
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		r.record(op)
		return nil
	}
	lease := c.lease()
	if lease == nil || lease.Token() != t.Token() {
		// The wrapper saw another acquisition: the runner's own bug.
		panic("history: the term's lease was not captured")
	}
	h := &held{lease: lease, id: int(r.leases.Add(1)), key: key}
	op.Outcome, op.Token, op.Lease = OK, t.Token(), h.id
	op.Deadline = lease.Deadline().Sub(r.start)
	r.record(op)
	r.watchers.Go(func() { r.watchEnd(id, h) })
	return &leading{held: h, term: t, seen: lease.Deadline()}
}

// lead uses a term: a few writes, with the term checked before each and
// waits between them long enough for the term to refresh itself several
// times; for a share of terms, a pause past the TTL before the last write
// (the leader stalls after its check; its term goes on refreshing unless
// a fault cuts it off); then it resigns. A term still led when the run's
// Duration ends writes no more and resigns. It returns how many operations
// it recorded.
func (r *runner) lead(ctx context.Context, id int, t *leading, rng *mrand.Rand) int {
	n := 0
	stop := r.start.Add(r.o.Duration)
	pause := rng.Float64() < r.o.PauseRate
	for range 1 + rng.IntN(4) {
		n += r.observe(id, t)
		if t.term.Err() != nil || time.Now().After(stop) {
			pause = false
			break
		}
		ok, m := r.write(ctx, id, t.held, rng)
		n += m
		if !ok {
			break
		}
		n += r.watch(ctx, id, t, jitter(rng, r.o.TTL/2))
	}
	if pause && t.term.Err() == nil {
		end := r.faults.begin("pause", id)
		sleep(ctx, r.o.TTL+jitter(rng, r.o.TTL/2))
		end()
		_, m := r.write(ctx, id, t.held, rng)
		n += m
		n += r.observe(id, t)
	}
	op := Op{Client: id, Key: t.key, Kind: Release, Token: t.term.Token(), Lease: t.id}
	rctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	op.Call = r.now()
	err := t.term.Resign(rctx)
	op.Return = r.now()
	r.recordRelease(op, err)
	return n + 1
}

// watch waits d, recording the term's refreshes as it sees them.
func (r *runner) watch(ctx context.Context, id int, t *leading, d time.Duration) int {
	n := 0
	step := max(r.o.TTL/10, time.Millisecond)
	for end := time.Now().Add(d); ctx.Err() == nil; {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		sleep(ctx, min(step, left))
		n += r.observe(id, t)
	}
	return n
}

// observe records the term's last refresh if its deadline moved since the
// last look (see the comment at the top of the file).
func (r *runner) observe(id int, t *leading) int {
	seenAt := r.now()
	d := t.lease.Deadline()
	if !d.After(t.seen) {
		return 0
	}
	t.seen = d
	// The deadline is the refresh's send + the granted TTL − a margin: the
	// granted TTL (rounded up by the backend, never down) puts the
	// interval's start at or before the send.
	sent := d.Add(-max(r.o.TTL, locker.GrantedTTL(t.lease))).Sub(r.start)
	r.record(Op{Client: id, Key: t.key, Kind: Refresh, Call: min(sent, seenAt), Return: seenAt, Outcome: OK,
		Token: t.lease.Token(), Lease: t.id, Deadline: d.Sub(r.start)})
	return 1
}

// livenessAcquire is the liveness check's acquisition of key: a campaign
// for an election run, whose term's lease is returned.
func (r *runner) livenessAcquire(ctx context.Context, l locker.Locker, key string) (locker.Lease, error) {
	if !r.o.Elections {
		return l.Acquire(ctx, key, r.lockOpts...)
	}
	c := &capture{Locker: l}
	e, err := election.New(c, key, election.WithTTL(r.o.TTL))
	if err != nil {
		return nil, err
	}
	t, err := e.Campaign(ctx, "")
	if err != nil {
		return nil, err
	}
	if lease := c.lease(); lease != nil && lease.Token() == t.Token() {
		return lease, nil
	}
	_ = t.Resign(context.WithoutCancel(ctx))
	return nil, errors.New("history: the term's lease was not captured")
}
