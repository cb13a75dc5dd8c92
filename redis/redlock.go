package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// NewRedlock returns a Locker that runs the Redlock algorithm over
// independent Redis masters (not replicas of each other, not one Cluster):
// a lock is held when a majority of them granted it within its validity.
// The clients stay the caller's: Close does not close them.
func NewRedlock(clients []goredis.UniversalClient, opts ...locker.Option) (locker.Locker, error) {
	return NewRedlockWith(clients, Config{}, opts...)
}

// NewRedlockWith is NewRedlock with the settings of cfg.
func NewRedlockWith(clients []goredis.UniversalClient, cfg Config, opts ...locker.Option) (locker.Locker, error) {
	b, err := newRedlock(clients, cfg)
	if err != nil {
		return nil, err
	}
	return locker.New(b, opts...)
}

// maxNodeTimeout caps the default per-master timeout: a master that has not
// answered in 250 ms is treated as down for the round, however long the TTL.
const maxNodeTimeout = 250 * time.Millisecond

type redlock struct {
	base
	nodes       []goredis.UniversalClient
	subs        []*subscriber
	gates       gates
	quorum      int
	nodeTimeout time.Duration // 0: derived from each lease's TTL
	closeClient bool
}

func newRedlock(clients []goredis.UniversalClient, cfg Config) (*redlock, error) {
	if len(clients) == 0 {
		return nil, fmt.Errorf("%w: redlock needs at least one master", locker.ErrInvalidOption)
	}
	if slices.Contains(clients, nil) {
		return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
	}
	if cfg.NodeTimeout < 0 {
		return nil, fmt.Errorf("%w: redlock node timeout %v is negative", locker.ErrInvalidOption, cfg.NodeTimeout)
	}
	bs, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	r := &redlock{base: bs, nodes: clients, quorum: len(clients)/2 + 1, nodeTimeout: cfg.NodeTimeout, closeClient: cfg.CloseClients}
	for _, c := range clients {
		r.subs = append(r.subs, r.subscriber(c))
	}
	return r, nil
}

func (r *redlock) Name() string { return "redlock" }

func (r *redlock) timeout(ttl time.Duration) time.Duration {
	if r.nodeTimeout > 0 {
		return r.nodeTimeout
	}
	return min(ttl/10, maxNodeTimeout)
}

// onAll runs fn against every master in parallel, each call bounded by the
// per-node timeout, and waits for all of them.
func (r *redlock) onAll(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, i int, c goredis.UniversalClient)) {
	var wg sync.WaitGroup
	for i, c := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			fn(nctx, i, c)
		}()
	}
	wg.Wait()
}

// nodeResult is one master's answer to acquire.lua.
type nodeResult struct {
	ok     bool
	n      int64 // the node's token when ok, the holder's PTTL (ms) otherwise
	err    error
	holder string // the holder's owner value, when not ok
}

// ErrContended is wrapped by the error of a Redlock TryAcquire whose last
// round ended split between contenders: no owner — neither the caller nor
// another — was granted a majority, and the silent masters (if any) could
// not have made one, so nobody held the lock and the caller did not get it
// either. Package locker reports it as ErrUnavailable (it is not ErrLocked:
// there was no holder); errors.Is tells it apart. Trying again later, or
// Acquire, usually succeeds.
var ErrContended = errors.New("redis: redlock contenders split the masters, no owner holds a majority")

// roundState is how a round that neither took the lock nor failed outright
// (too many masters silent, or a majority granted without a token or
// validity) ended.
type roundState int

const (
	// held: another owner's grants alone make a quorum; it holds the lock.
	held roundState = iota + 1
	// unknown: another owner's grants, with the masters that did not
	// answer, could make a quorum; nobody can tell whether it holds the lock.
	unknown
	// split: the masters that answered are split between contenders and,
	// whatever the silent ones hold, nobody has a quorum.
	split
)

// verdict is the outcome of a round that did not take the lock and did not
// fail outright.
type verdict struct {
	state roundState
	// wait, when held or unknown: the longest remaining TTL of that owner's
	// grants, an upper bound on how long to wait for them.
	wait time.Duration
	// silent is how many masters did not answer; errs what they said.
	silent int
	errs   []error
	// others is, per other owner that answered, how many masters it holds;
	// granted how many granted this round (undone since).
	others  []int
	granted int
}

// err is TryAcquire's answer to a round that ended as v after rounds rounds.
func (v verdict) err(nodes, quorum, rounds int) error {
	switch v.state {
	case held:
		return locker.ErrLocked
	case unknown:
		return fmt.Errorf("redlock: %d of %d masters did not answer; cannot tell whether the lock is held (other owners hold %v of the answering ones, quorum %d): %w",
			v.silent, nodes, v.others, quorum, errors.Join(v.errs...))
	}
	return fmt.Errorf("redlock: after %d rounds, grants split among the %d masters (this attempt %d, other owners %v, silent %d), quorum %d: %w",
		rounds, nodes, v.granted, v.others, v.silent, quorum, ErrContended)
}

// round is one Redlock acquisition round, for waiter (queued on the masters
// that refuse) or, with "", without queueing. It returns the lock; or an error
// when too many masters failed for any majority to answer (or a majority
// granted but the token or the validity failed); or else the verdict: whether
// another owner holds the lock, may hold it, or the masters are split.
func (r *redlock) round(ctx context.Context, req *driver.Request, n names, waiter string) (driver.Lock, verdict, error) {
	val := value(req)
	timeout := r.timeout(req.TTL)
	res := make([]nodeResult, len(r.nodes))
	keys, args := r.acquireArgs(n, val, req.TTL, waiter)
	start := time.Now() // before the first request: validity counts from here
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		v, err := acquireScript.Run(ctx, c, keys, args...).Result()
		ok, x, err := pair(v, err)
		res[i] = nodeResult{ok: ok, n: x, err: err, holder: holderOf(v)}
	})

	var granted, failed int
	var token int64
	var errs []error
	others := map[string][]time.Duration{} // other owners' remaining TTLs, per owner
	for i, x := range res {
		switch {
		case x.err != nil:
			failed++
			errs = append(errs, fmt.Errorf("master %d: %w", i, x.err))
		case x.ok:
			granted++
			token = max(token, x.n)
		default:
			others[x.holder] = append(others[x.holder], time.Duration(x.n)*time.Millisecond)
		}
	}

	if granted >= r.quorum {
		// Any two majorities intersect: writing the token back to a majority
		// before the lock counts means every later majority reads a fence
		// at least this high, so its own token is larger.
		fenced := r.raiseFences(ctx, res, n, val, token, timeout)
		validity := req.TTL - time.Since(start) - driver.DriftMargin(req.TTL)
		if fenced >= r.quorum && validity > 0 {
			return &rlock{r: r, n: n, val: val, token: uint64(token), start: start, ttl: req.TTL}, verdict{}, nil
		}
		if validity <= 0 {
			errs = append(errs, fmt.Errorf("redlock: round took %v, longer than the validity of TTL %v", time.Since(start).Round(time.Millisecond), req.TTL))
		} else {
			errs = append(errs, fmt.Errorf("redlock: fencing token written to %d of %d masters, quorum %d", fenced, len(r.nodes), r.quorum))
		}
		failed = len(r.nodes) // not a matter of waiting for another owner
	}

	// Failed: undo on every master, the ones that did not answer included
	// (their grant may just have been slow), before anyone waits or returns.
	// The undo wakes nobody: waiters wait on a majority holder, not on the
	// scattered grants of a failed round. (A master that granted took the
	// waiter out of its queue and woke the next one there; the waiter's
	// next round queues it again, at the back.)
	r.releaseAll(context.WithoutCancel(ctx), n, val, false, timeout)

	if failed > len(r.nodes)-r.quorum {
		return nil, verdict{}, fmt.Errorf("redlock: %d of %d masters failed, quorum %d: %w", failed, len(r.nodes), r.quorum, errors.Join(errs...))
	}
	// Another owner holds the lock if its grants alone make a majority (only
	// one owner can). It may hold it if its grants, with the masters that did
	// not answer, make a majority: nobody can tell. Either way a waiter waits
	// until its grants expire (or for its release). Otherwise the round was a
	// split between contenders, and only jitter separates their next rounds.
	v := verdict{state: split, wait: -1, silent: failed, errs: errs, granted: granted}
	for _, pttls := range others {
		v.others = append(v.others, len(pttls))
		switch {
		case len(pttls) >= r.quorum:
			v.state, v.wait = held, slices.Max(pttls)
		case len(pttls)+failed >= r.quorum && v.state == split:
			v.state, v.wait = unknown, slices.Max(pttls)
		}
	}
	slices.Sort(v.others)
	slices.Reverse(v.others)
	return nil, v, nil
}

// raiseFences sets the fence of every granting master that is below token,
// and returns how many granting masters now hold token.
func (r *redlock) raiseFences(ctx context.Context, res []nodeResult, n names, val string, token int64, timeout time.Duration) int {
	var mu sync.Mutex
	fenced := 0
	tok := strconv.FormatInt(token, 10)
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		if !res[i].ok || res[i].err != nil {
			return
		}
		if res[i].n != token {
			ok, err := fenceScript.Run(ctx, c, []string{n.lock, n.fence}, val, tok).Int64()
			if err != nil || ok != 1 {
				return
			}
		}
		mu.Lock()
		fenced++
		mu.Unlock()
	})
	return fenced
}

// releaseAll runs release.lua on every master and returns how many released
// the lock and how many failed. With wake, each master that released wakes
// the head of its queue: at most one waiter per master.
func (r *redlock) releaseAll(ctx context.Context, n names, val string, wake bool, timeout time.Duration) (released, failed int, err error) {
	var mu sync.Mutex
	var errs []error
	ch := ""
	if wake {
		ch = r.wake
	}
	keys := n.queueKeys()
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		x, e := releaseScript.Run(ctx, c, keys[:], val, ch).Int64()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e != nil:
			failed++
			errs = append(errs, fmt.Errorf("master %d: %w", i, e))
		case x == 1:
			released++
		}
	})
	return released, failed, errors.Join(errs...)
}

// jitter is a random pause of up to span << n (never more than half the
// TTL): the range doubles with each failure in a row, so that the more
// contenders split the masters, the wider they spread, until one round runs
// alone and wins.
func jitter(span time.Duration, n int, ttl time.Duration) time.Duration {
	return rand.N(min(span<<min(n, 6), ttl/2) + time.Millisecond)
}

// tryRounds bounds the rounds of one TryAcquire: when a round is split
// between contenders (or cannot tell, for silent masters, whether another
// owner holds the lock) a few more rounds, separated by jitter, usually
// decide it — one contender wins, or shows up as the majority holder. It is
// still one attempt: TryAcquire never waits for a holder.
const tryRounds = 3

func (r *redlock) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	n := r.names(req.Key)
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for i := 1; ; i++ {
		start := time.Now()
		l, v, err := r.round(ctx, req, n, "")
		if l != nil || err != nil {
			return l, err
		}
		if v.state == held || i == tryRounds || ctx.Err() != nil {
			return nil, v.err(len(r.nodes), r.quorum, i)
		}
		// As Acquire does on a split: spread over a few round durations.
		d := jitter(2*time.Since(start), i-1, req.TTL)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, v.err(len(r.nodes), r.quorum, i)
		}
	}
}

// failedRounds is how many rounds in a row may fail for want of answering
// masters before Acquire gives up with the error: a burst of load can make a
// majority miss the per-node timeout once, while a majority that is down
// stays down, and the caller should hear of it in well under its deadline.
const failedRounds = 3

func (r *redlock) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	n := r.names(req.Key)
	// One acquisition per key at a time in this Locker: its goroutines would
	// only split the masters between themselves.
	release, err := r.gates.enter(ctx, n.tag)
	if err != nil {
		return nil, err
	}
	defer release()
	l, _, err := r.retryRound(ctx, req, n, "")
	if l != nil || err != nil {
		return l, err
	}
	w := r.hub.add()
	defer r.hub.remove(w)
	r.subscribe(ctx, req.TTL)
	defer w.stopTimer()
	splits := 0
	for {
		start := time.Now()
		l, v, err := r.retryRound(ctx, req, n, w.id)
		if l != nil {
			return l, nil
		}
		if err != nil {
			r.leaveAll(ctx, n, w, req.TTL)
			return nil, err
		}
		var d time.Duration
		if v.state == split {
			// Spread over a few round durations: enough for one contender's
			// round to finish before the next one's starts.
			d = jitter(2*time.Since(start), splits, req.TTL)
			splits++
		} else {
			d = fallbackWait(v.wait, req.TTL)
			splits = 0
		}
		if err := w.wait(ctx, d); err != nil {
			r.leaveAll(ctx, n, w, req.TTL)
			return nil, err
		}
	}
}

// leaveAll takes a waiter that gives up out of every master's queue.
func (r *redlock) leaveAll(ctx context.Context, n names, w *waiter, ttl time.Duration) {
	r.onAll(context.WithoutCancel(ctx), r.timeout(ttl), func(ctx context.Context, _ int, c goredis.UniversalClient) {
		r.leave(ctx, c, n, w)
	})
}

// retryRound runs rounds until one does not fail for want of masters, at
// most failedRounds of them, separated by jitter.
func (r *redlock) retryRound(ctx context.Context, req *driver.Request, n names, waiter string) (driver.Lock, verdict, error) {
	for i := 1; ; i++ {
		l, v, err := r.round(ctx, req, n, waiter)
		if err == nil || i == failedRounds || ctx.Err() != nil {
			return l, v, err
		}
		t := time.NewTimer(jitter(r.timeout(req.TTL), i-1, req.TTL))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, verdict{}, err
		}
	}
}

// subscribe starts the wake-up subscription on every master that has none.
// Failures are not errors: a master that cannot be subscribed to is likely
// down, and the PTTL-bounded wait covers the messages it would have sent. A
// master that failed is not tried again for resubscribeAfter, so waiters do
// not each pay for a dead master.
func (r *redlock) subscribe(ctx context.Context, ttl time.Duration) {
	var wg sync.WaitGroup
	for _, s := range r.subs {
		if !s.due() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Longer than a round's node timeout: a subscription is made once
			// per Locker, and a loaded master may be slow to confirm it.
			sctx, cancel := context.WithTimeout(ctx, max(r.timeout(ttl), time.Second))
			defer cancel()
			s.failed(s.ensure(sctx))
		}()
	}
	wg.Wait()
}

func (r *redlock) Close() error {
	var errs []error
	for _, s := range r.subs {
		errs = append(errs, s.close())
	}
	if r.closeClient {
		for _, c := range r.nodes {
			if err := c.Close(); err != nil && !errors.Is(err, goredis.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rlock is a lock held on a majority of masters.
type rlock struct {
	r     *redlock
	n     names
	val   string
	token uint64
	start time.Time
	ttl   time.Duration // of the acquisition: sets the per-node timeout of Release
}

func (l *rlock) Token() uint64    { return l.token }
func (l *rlock) Start() time.Time { return l.start }

// Refresh extends the lock on every master that still holds it; it succeeds
// when a majority did so within the validity the new TTL gives, counted
// from before the first request.
func (l *rlock) Refresh(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	var mu sync.Mutex
	var ok, lost int
	var errs []error
	// A refresh does not spend the validity of a new grant: the deadline
	// counts from before it was sent. So a master may take up to the refresh
	// interval (a third of the TTL) to answer, not just the node timeout.
	l.r.onAll(ctx, max(l.r.timeout(ttl), ttl/3), func(ctx context.Context, i int, c goredis.UniversalClient) {
		x, err := refreshScript.Run(ctx, c, []string{l.n.lock}, l.val, ttlMillis(ttl)).Int64()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("master %d: %w", i, err))
		case x == 1:
			ok++
		default:
			lost++
		}
	})
	switch {
	case ok >= l.r.quorum && time.Since(start) < ttl-driver.DriftMargin(ttl):
		return nil
	case ok >= l.r.quorum:
		return fmt.Errorf("redlock: refresh took %v, longer than the validity of TTL %v", time.Since(start).Round(time.Millisecond), ttl)
	case lost > len(l.r.nodes)-l.r.quorum:
		return locker.ErrLeaseLost
	}
	return fmt.Errorf("redlock: refreshed on %d of %d masters, quorum %d: %w", ok, len(l.r.nodes), l.r.quorum, errors.Join(errs...))
}

// Release deletes the lock on every master that holds it. It reports
// ErrLeaseLost when no majority held it any more, and an error when too
// many masters failed to tell.
func (l *rlock) Release(ctx context.Context) error {
	released, failed, err := l.r.releaseAll(ctx, l.n, l.val, true, l.r.timeout(l.ttl))
	switch {
	case released >= l.r.quorum:
		return nil
	case released+failed >= l.r.quorum:
		return fmt.Errorf("redlock: released on %d of %d masters, %d failed: %w", released, len(l.r.nodes), failed, err)
	}
	return locker.ErrLeaseLost
}

// gates lets one goroutine per key at a time into Acquire.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	ch   chan struct{} // holds a value while a goroutine is inside
	refs int           // goroutines inside or waiting; the gate goes at 0
}

// enter waits for key's gate, or for ctx to end, and returns its release.
func (g *gates) enter(ctx context.Context, key string) (func(), error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*gate{}
	}
	gt := g.m[key]
	if gt == nil {
		gt = &gate{ch: make(chan struct{}, 1)}
		g.m[key] = gt
	}
	gt.refs++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if gt.refs--; gt.refs == 0 {
			delete(g.m, key)
		}
		g.mu.Unlock()
	}
	select {
	case gt.ch <- struct{}{}:
		return func() { <-gt.ch; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
