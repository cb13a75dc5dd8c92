package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/distlock/locker"
)

// keySuffixes make the run's key names. "a" and "a/b" must not nest; the
// others carry what a backend must encode rather than interpret.
var keySuffixes = []string{"a", "a/b", `q'"%_*;--`, "..", "{tag}:lua]]", "ü\t$1"}

func keyNames(runID string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("history/%s/%s", runID, keySuffixes[i%len(keySuffixes)])
		if i >= len(keySuffixes) {
			keys[i] += fmt.Sprint(i / len(keySuffixes))
		}
	}
	return keys
}

// Run records one history: opts.Clients Lockers made by newLocker run
// random operations on opts.Keys fresh keys until opts.Ops operations each
// or opts.Duration, while opts.Nemesis (if any) injects faults; then every
// Locker is closed, the liveness of every key is checked, and the history
// is checked. Violations are in the Result; an error means the run could
// not be made (a Locker could not be created, bad options) or ctx ended.
//
// Every goroutine Run starts has ended when it returns.
func Run(ctx context.Context, newLocker NewLocker, opts Options) (*Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Seed == 0 {
		o.Seed = mrand.Uint64() | 1
	}
	var id [6]byte
	_, _ = rand.Read(id[:]) // never fails (Go 1.24+)
	r := &runner{o: o, keys: keyNames(hex.EncodeToString(id[:]), o.Keys), res: newResource(o.Guard)}
	// Refreshes are operations of the history, made by the clients
	// themselves: a lease that refreshed itself in the background would
	// never run out during a pause.
	r.lockOpts = []locker.Option{locker.WithAutoRefresh(false)}
	if o.Limit > 1 {
		r.lockOpts = append(r.lockOpts, locker.WithLimit(o.Limit))
	}
	r.lockOpts = append(r.lockOpts, o.LockerOptions...)
	r.lockOpts = append(r.lockOpts, locker.WithTTL(o.TTL))
	lockers := make([]locker.Locker, 0, o.Clients)
	defer func() {
		for _, l := range lockers {
			_ = l.Close()
		}
	}()
	for range o.Clients {
		l, err := newLocker(ctx)
		if err != nil {
			return nil, fmt.Errorf("history: new locker: %w", err)
		}
		lockers = append(lockers, l)
	}
	// The run's clock starts once its clients can act: Duration bounds what
	// they do, not how long their Lockers took to make (a loaded machine's
	// ZooKeeper sessions took most of a run's Duration, and its fault was
	// never injected).
	r.start = time.Now()
	r.faults = &Faults{start: r.start}

	nctx, stopNemesis := context.WithCancel(ctx)
	defer stopNemesis()
	nemesisDone := make(chan error, 1)
	if o.Nemesis != nil {
		go func() { nemesisDone <- o.Nemesis.Run(nctx, r.faults) }()
	} else {
		nemesisDone <- nil
	}
	var wg sync.WaitGroup
	for i, l := range lockers {
		if o.Elections {
			wg.Go(func() { r.candidate(ctx, i, l) })
			continue
		}
		wg.Go(func() { r.client(ctx, i, l) })
	}
	wg.Wait()
	stopNemesis()
	nemesisErr := <-nemesisDone

	// Close every client before the liveness check, so that what they held
	// is released (or left to expire, for a client the nemesis cut off).
	for _, l := range lockers {
		_ = l.Close()
	}
	lockers = nil
	// Closing ended every lease, so every watcher has recorded its end.
	r.watchers.Wait()
	if o.Liveness > 0 {
		if err := r.liveness(ctx, newLocker); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := r.check()
	res.NemesisErr = nemesisErr
	return res, nil
}

type runner struct {
	o        Options
	keys     []string
	lockOpts []locker.Option
	res      *resource
	start    time.Time
	faults   *Faults

	leases, writes atomic.Int64
	watchers       sync.WaitGroup // one per granted lease, until its Done closes

	mu         sync.Mutex
	ops        []Op
	violations []Violation // found while running (liveness)

	livenessSlowest, livenessBound time.Duration // see Result
}

func (r *runner) now() time.Duration { return time.Since(r.start) }

func (r *runner) record(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func jitter(rng *mrand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

// held is a lease a client holds, as the runner tracks it.
type held struct {
	lease     locker.Lease
	id        int
	key       string
	refreshed time.Time // when the last successful acquisition or refresh was called
}

// client runs one client's operations. Its loop is bounded in count and in
// time, and every call in it by a timeout, so it stops by itself.
func (r *runner) client(ctx context.Context, id int, l locker.Locker) {
	rng := mrand.New(mrand.NewPCG(r.o.Seed, uint64(id)))
	stop := r.start.Add(r.o.Duration)
	for n := 0; n < r.o.Ops && time.Now().Before(stop) && ctx.Err() == nil; {
		key := r.keys[rng.IntN(len(r.keys))]
		h := r.acquire(ctx, id, l, key, rng)
		n++
		if h == nil {
			sleep(ctx, jitter(rng, r.o.TTL/8))
			continue
		}
		n += r.hold(ctx, id, h, rng)
	}
}

// acquire makes a blocking acquisition with a random timeout, or a
// try-acquisition, and records it.
func (r *runner) acquire(ctx context.Context, id int, l locker.Locker, key string, rng *mrand.Rand) *held {
	op := Op{Client: id, Key: key, Kind: TryAcquire}
	timeout := r.o.OpTimeout
	if rng.IntN(2) == 0 {
		// From well under a TTL (often runs out behind a pause) to two.
		op.Kind, timeout = Acquire, r.o.TTL/4+jitter(rng, 2*r.o.TTL)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sent := time.Now()
	op.Call = r.now()
	var lease locker.Lease
	var err error
	if op.Kind == Acquire {
		lease, err = l.Acquire(actx, key, r.lockOpts...)
	} else {
		lease, err = l.TryAcquire(actx, key, r.lockOpts...)
	}
	op.Return = r.now()
	var h *held
	switch {
	case err == nil:
		h = &held{lease: lease, id: int(r.leases.Add(1)), key: key, refreshed: sent}
		op.Outcome, op.Token, op.Lease = OK, lease.Token(), h.id
		op.Deadline = lease.Deadline().Sub(r.start)
		r.watchers.Go(func() { r.watchEnd(id, h) })
	case errors.Is(err, locker.ErrLocked):
		op.Outcome = Locked
	default:
		op.Outcome = Ambiguous
	}
	if err != nil {
		op.Err = err.Error()
	}
	r.record(op)
	return h
}

// hold uses a lease: a few writes with refreshes between them, then a
// release — or, for a share of holds, a pause past the TTL before the last
// write and the release (the GC-pause story). It returns how many
// operations it recorded.
func (r *runner) hold(ctx context.Context, id int, h *held, rng *mrand.Rand) int {
	n := 0
	pause := rng.Float64() < r.o.PauseRate
	for range 1 + rng.IntN(3) {
		// A careful holder checks its lease before each write.
		if h.lease.Err() != nil {
			break
		}
		if r.o.Limit == 1 {
			ok, m := r.write(ctx, id, h, rng)
			n += m
			if !ok {
				break
			}
		}
		sleep(ctx, jitter(rng, r.o.TTL/5))
		if rng.IntN(2) == 0 || time.Since(h.refreshed) > r.o.TTL/3 {
			n++
			if !r.refresh(ctx, id, h) {
				break
			}
		}
	}
	if pause && h.lease.Err() == nil {
		// It checked its lease, and then the world stopped.
		end := r.faults.begin("pause", id)
		sleep(ctx, r.o.TTL+jitter(rng, r.o.TTL/2))
		end()
		if r.o.Limit == 1 {
			_, m := r.write(ctx, id, h, rng)
			n += m
		}
	}
	r.release(ctx, id, h)
	return n + 1
}

// write updates the fenced resource in two steps; ok when both were
// admitted. It returns how many operations it recorded.
func (r *runner) write(ctx context.Context, id int, h *held, rng *mrand.Rand) (ok bool, n int) {
	w := int(r.writes.Add(1))
	if !r.writeStep(ctx, id, h, w, false) {
		return false, 1
	}
	sleep(ctx, jitter(rng, 2*time.Millisecond))
	return r.writeStep(ctx, id, h, w, true), 2
}

func (r *runner) writeStep(ctx context.Context, id int, h *held, w int, end bool) bool {
	op := Op{Client: id, Key: h.key, Kind: WriteBegin, Token: h.lease.Token(), Lease: h.id, Write: w}
	if end {
		op.Kind = WriteEnd
	}
	wctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	op.Call = r.now()
	outcome, err := r.res.step(wctx, h.key, w, op.Token, end)
	op.Return = r.now()
	op.Outcome = outcome
	if err != nil {
		op.Err = err.Error()
	}
	r.record(op)
	return outcome == OK
}

func (r *runner) refresh(ctx context.Context, id int, h *held) bool {
	op := Op{Client: id, Key: h.key, Kind: Refresh, Token: h.lease.Token(), Lease: h.id}
	rctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	sent := time.Now()
	op.Call = r.now()
	err := h.lease.Refresh(rctx)
	op.Return = r.now()
	switch {
	case err == nil:
		op.Outcome = OK
		op.Deadline = h.lease.Deadline().Sub(r.start)
		h.refreshed = sent
	case errors.Is(err, locker.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		op.Outcome = Ambiguous
	default:
		op.Outcome = Lost
	}
	if err != nil {
		op.Err = err.Error()
	}
	r.record(op)
	return err == nil
}

// watchEnd records when h's lease ends by loss (not by its release), as an
// Ended operation at the moment Done closed.
func (r *runner) watchEnd(id int, h *held) {
	<-h.lease.Done()
	t := r.now()
	err := h.lease.Err()
	if !errors.Is(err, locker.ErrLeaseLost) {
		return
	}
	r.record(Op{Client: id, Key: h.key, Kind: Ended, Call: t, Return: t, Outcome: Lost,
		Token: h.lease.Token(), Lease: h.id, Err: err.Error()})
}

func (r *runner) release(ctx context.Context, id int, h *held) {
	op := Op{Client: id, Key: h.key, Kind: Release, Token: h.lease.Token(), Lease: h.id}
	rctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	op.Call = r.now()
	err := h.lease.Release(rctx)
	op.Return = r.now()
	r.recordRelease(op, err)
}

// recordRelease records a release (or resignation) that returned err.
func (r *runner) recordRelease(op Op, err error) {
	switch {
	case err == nil:
		op.Outcome = OK
	case errors.Is(err, locker.ErrLeaseLost), errors.Is(err, locker.ErrReleased):
		op.Outcome = Lost
	default:
		op.Outcome = Ambiguous
	}
	if err != nil {
		op.Err = err.Error()
	}
	r.record(op)
}

// liveness checks, with a fresh client, that every key can be acquired
// within the bound; the acquisitions join the history (as one more client).
func (r *runner) liveness(ctx context.Context, newLocker NewLocker) error {
	r.livenessBound = r.o.Liveness
	start := time.Now()
	l, err := r.livenessClient(ctx, newLocker)
	r.livenessSlowest = time.Since(start)
	if err != nil {
		return fmt.Errorf("history: new locker for the liveness check: %w", err)
	}
	defer l.Close()
	id := r.o.Clients
	for _, key := range r.keys {
		op := Op{Client: id, Key: key, Kind: Acquire}
		actx, cancel := context.WithTimeout(ctx, r.o.Liveness)
		op.Call = r.now()
		lease, err := r.livenessAcquire(actx, l, key)
		op.Return = r.now()
		r.livenessSlowest = max(r.livenessSlowest, op.Return-op.Call)
		cancel()
		if err != nil {
			op.Outcome, op.Err = Ambiguous, err.Error()
			r.record(op)
			r.violations = append(r.violations, Violation{Check: CheckLiveness, Key: key,
				Detail: fmt.Sprintf("not acquirable within %v after the run: %v", r.o.Liveness, err), Ops: []Op{op}})
			continue
		}
		h := &held{lease: lease, id: int(r.leases.Add(1)), key: key}
		op.Outcome, op.Token, op.Lease = OK, lease.Token(), h.id
		op.Deadline = lease.Deadline().Sub(r.start)
		r.record(op)
		r.release(ctx, id, h)
	}
	return nil
}

// livenessClient makes the liveness check's client within the liveness
// bound, trying again after a failure: just after the faults heal a cluster
// may still be electing a leader or taking sessions back, and "live within
// the bound" covers reconnecting as it covers acquiring.
func (r *runner) livenessClient(ctx context.Context, newLocker NewLocker) (locker.Locker, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Liveness)
	defer cancel()
	pause := 50 * time.Millisecond
	for {
		l, err := newLocker(ctx)
		if err == nil {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("not made within %v: %w", r.o.Liveness, err)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// check runs every check on the recorded history.
func (r *runner) check() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &Result{Seed: r.o.Seed, Duration: r.now(), Keys: r.keys, Ops: r.ops, Windows: r.faults.windows(), limit: r.o.Limit,
		LivenessSlowest: r.livenessSlowest, LivenessBound: r.livenessBound}
	sortOps(res.Ops)
	c := &res.Counts
	c.Runs = 1
	c.Operations = len(res.Ops)
	writes := map[int][]Op{}
	for _, op := range res.Ops {
		switch {
		case op.Outcome == Ambiguous:
			c.Ambiguous++
		case op.Outcome == OK && (op.Kind == Acquire || op.Kind == TryAcquire):
			c.Acquisitions++
		case op.Outcome == Refused:
			c.StaleWritesRefused++
		}
		if op.Write != 0 {
			writes[op.Write] = append(writes[op.Write], op)
		}
	}
	c.Writes = r.res.acked()
	parts := byKey(res.Ops, r.keys)
	for _, k := range r.keys {
		if len(parts[k]) == 0 {
			continue
		}
		c.Histories++
		if clients(parts[k], r.o.Clients) >= 3 {
			c.Contended++
		}
		lin, v := checkLinearizable(res.model(), k, parts[k], r.o.CheckTimeout, 2*r.o.CheckTimeout)
		if lin == porcupine.Unknown {
			res.UnknownKeys = append(res.UnknownKeys, k)
		}
		if v != nil {
			res.Violations = append(res.Violations, *v)
		}
		res.Violations = append(res.Violations, checkTokens(k, parts[k])...)
	}
	res.Violations = append(res.Violations, r.res.check(writes)...)
	res.Violations = append(res.Violations, r.violations...)
	c.Violations = len(res.Violations)
	c.Unknown = len(res.UnknownKeys)
	return res
}

// clients counts the distinct clients of the run among ops (not the
// liveness check's, whose id is n).
func clients(ops []Op, n int) int {
	seen := map[int]bool{}
	for _, op := range ops {
		if op.Client < n {
			seen[op.Client] = true
		}
	}
	return len(seen)
}
