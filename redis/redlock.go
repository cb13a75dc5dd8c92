package redis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/places"
	goredis "github.com/redis/go-redis/v9"
)

// NewRedlock returns a Locker that runs the Redlock algorithm over
// independent Redis masters (not replicas of each other, not one Cluster):
// a lock is held when a majority of them granted it within its validity.
// It needs at least 3 distinct masters (WithAllowFewMasters for fewer); a
// client given twice, or two clients of one address, count as one master.
// Each client must honour context deadlines (go-redis:
// ContextTimeoutEnabled), or the per-master timeout could not be enforced.
// The clients stay the caller's: Close does not close them. opts are
// locker's options and this package's (WithPrefix, WithNodeTimeout,
// WithAllowFewMasters).
func NewRedlock(clients []goredis.UniversalClient, opts ...locker.Option) (locker.Locker, error) {
	return newLocker(opts, func(cfg config) (*redlock, error) { return newRedlock(clients, cfg) })
}

// grantScript is a Redlock round that does not queue (grant.lua): it takes
// a hint, this client's clock plus hintMargin, that the masters propose as
// the token when it is above their counters and clocks. Then they all
// propose the same token and the round needs no write-back: an uncontended
// acquire is one round trip to every master, not two. A round that queues a
// waiter runs acquire.lua, whose proposals differ, and writes back.
var grantScript = goredis.NewScript(grantLib + grantLua)

//go:embed grant.lua
var grantLua string

// hintMargin puts the hint ahead of the masters' clocks (TIME) when the
// request reaches them: more than a request's latency plus the clocks'
// skew, and well within the 10 s beyond a master's clock where grant.lua
// stops taking hints.
const hintMargin = time.Second

// maxNodeTimeout caps the default per-master timeout: a master that has not
// answered in 250 ms is treated as down for the round, however long the TTL.
const maxNodeTimeout = 250 * time.Millisecond

// minMasters is the fewest distinct masters a Redlock runs on unless the
// caller allows fewer: with 1 or 2 the quorum is every master, so that one
// master's failure stops all locking, and 1 is no Redlock at all.
const minMasters = 3

type redlock struct {
	base
	nodes       []goredis.UniversalClient // distinct masters
	owned       []goredis.UniversalClient // every client given, closed by Close if closeClient
	subs        []*subscriber
	refreshes   []*scriptBatch // per master: refresh.lua, pipelined
	gates       *places.Set    // one Acquire per key at a time (see Acquire)
	quorum      int
	nodeTimeout time.Duration // 0: derived from each lease's TTL
	closeClient bool

	// Background clean-ups (settle): Close cancels and waits for them.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex
	bgWG     sync.WaitGroup
	closed   bool
}

func newRedlock(clients []goredis.UniversalClient, cfg config) (*redlock, error) {
	nodes, err := distinctMasters(clients)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 || len(nodes) < minMasters && !cfg.AllowFewMasters {
		return nil, fmt.Errorf("%w: redlock needs at least %d distinct masters, got %d (of %d clients); fewer must be allowed explicitly (WithAllowFewMasters, URL allow_few_masters=true)",
			locker.ErrInvalidOption, minMasters, len(nodes), len(clients))
	}
	bs, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	r := &redlock{base: bs, nodes: nodes, owned: clients, gates: places.New(1), quorum: len(nodes)/2 + 1,
		nodeTimeout: cfg.NodeTimeout, closeClient: cfg.CloseClients}
	r.bgCtx, r.bgCancel = context.WithCancel(context.Background())
	for _, c := range nodes {
		r.subs = append(r.subs, r.subscriber(c))
		r.refreshes = append(r.refreshes, &scriptBatch{c: c, script: refreshScript, background: r.background})
	}
	return r, nil
}

// distinctMasters returns clients without those that reach a master
// already in the list (the same client again, or a client of the same
// address): counted twice, one master would be two votes of a majority.
// It refuses a client that would not honour the per-master timeout.
func distinctMasters(clients []goredis.UniversalClient) ([]goredis.UniversalClient, error) {
	nodes := make([]goredis.UniversalClient, 0, len(clients))
	seen := make(map[any]bool, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
		}
		if !honoursContext(c) {
			return nil, fmt.Errorf("%w: redlock master %d: its client was made without ContextTimeoutEnabled; go-redis would then ignore the per-master timeout, and a master that does not answer would hold up every round for the client's read timeout",
				locker.ErrInvalidOption, i)
		}
		if id := masterID(c); !seen[id] {
			seen[id] = true
			nodes = append(nodes, c)
		}
	}
	return nodes, nil
}

// masterID is what identifies the master a client reaches: the network and
// address (host in lower case) of a plain client; the client itself for any
// other (a Sentinel-managed client's master moves). Addresses are compared
// as written: localhost and 127.0.0.1 are not recognised as one.
func masterID(c goredis.UniversalClient) any {
	if pc, ok := c.(*goredis.Client); ok {
		if o := pc.Options(); o.Addr != "FailoverClient" {
			return o.Network + "://" + strings.ToLower(o.Addr)
		}
	}
	return c
}

// honoursContext reports whether go-redis bounds c's requests by their
// context's deadline. A client type of the caller's own is trusted to.
func honoursContext(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
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

// ErrContended is wrapped by the ErrLocked of a Redlock TryAcquire whose
// last round ended split between contenders: the masters that answered (a
// majority) were shared among owners, the caller's undone grants included,
// and none had a majority. It is contention, so ErrLocked, as on every
// backend; errors.Is tells this case apart from a majority holder. Trying
// again later, or Acquire, usually succeeds.
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

// err is TryAcquire's answer to a round that ended as v after rounds
// rounds. A majority of the masters answered (else the round failed
// outright) and did not grant: contention, ErrLocked, whoever holds them.
func (v verdict) err(nodes, quorum, rounds int) error {
	switch v.state {
	case held:
		return locker.ErrLocked
	case unknown:
		return fmt.Errorf("%w: redlock: other owners hold %v of the %d masters that answered, %d did not (quorum %d): %v",
			locker.ErrLocked, v.others, nodes-v.silent, v.silent, quorum, errors.Join(v.errs...))
	}
	return fmt.Errorf("%w: redlock: after %d rounds, grants split among the %d masters (this attempt %d, other owners %v, silent %d), quorum %d: %w",
		locker.ErrLocked, rounds, nodes, v.granted, v.others, v.silent, quorum, ErrContended)
}

// acquisition is one Acquire or TryAcquire: its key's names, its owner
// value, and the masters where a failed round may have left its lock.
type acquisition struct {
	req *driver.Request
	n   names
	val string
	// pending[i]: master i may hold, or may yet be given (a request of
	// unknown outcome still queued there), this acquisition's lock, which
	// the undo of the round could not be seen to remove. Nil while none.
	pending []bool
	// stuck: the masters that granted this acquisition's lock and where
	// the undo failed, so the grant may stand, refusing others.
	stuck []int
}

func (r *redlock) newAcquisition(req *driver.Request) *acquisition {
	return &acquisition{req: req, n: r.names(req.Key), val: value(req)}
}

// refusalLeftGrants turns a refusal (ErrLocked) into ErrUnavailable when a
// master granted the acquisition and its undo failed there: that grant may
// stand, refusing others while nobody holds the key, until settle removes
// it or it expires, and ErrLocked would say the attempt left nothing
// behind. (A request of unknown outcome on a master that did not answer —
// frozen, say — leaves a refusal ErrLocked: that master refuses everyone
// while it does not answer, and a Redlock deployment rides out a minority
// of such masters.)
func (a *acquisition) refusalLeftGrants(err error) error {
	if !errors.Is(err, locker.ErrLocked) || len(a.stuck) == 0 {
		return err
	}
	return fmt.Errorf("%w: redlock: refused (%v), and the undo of this attempt's grants did not get through to masters %v: they may refuse others until removed in the background or expired",
		locker.ErrUnavailable, err, a.stuck)
}

func (a *acquisition) mark(i, nodes int) {
	if a.pending == nil {
		a.pending = make([]bool, nodes)
	}
	a.pending[i] = true
}

// round is one Redlock acquisition round, for waiter (queued on the masters
// that refuse) or, with "", without queueing. It returns the lock; or an error
// when too many masters failed for any majority to answer (or a majority
// granted but the token or the validity failed); or else the verdict: whether
// another owner holds the lock, may hold it, or the masters are split.
func (r *redlock) round(ctx context.Context, a *acquisition, waiter string) (driver.Lock, verdict, error) {
	req, n, val := a.req, a.n, a.val
	timeout := r.timeout(req.TTL)
	res := make([]nodeResult, len(r.nodes))
	script, keys, args := grantScript, []string{n.lock, n.fence}, []any{val, serverTTL(req), req.Value, time.Now().Add(hintMargin).UnixMicro()}
	if waiter != "" {
		script = acquireScript
		keys, args = r.acquireArgs(n, req, val, waiter)
	}
	start := time.Now() // before the first request: validity counts from here
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		v, err := script.Run(ctx, c, keys, args...).Result()
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
		fenced, ferr := r.raiseFences(ctx, res, n, val, token, timeout)
		validity := req.TTL - time.Since(start) - driver.DriftMargin(req.TTL)
		if fenced >= r.quorum && validity > 0 {
			if waiter != "" {
				r.leaveUngranted(ctx, res, n, waiter, timeout)
			}
			granted := make([]bool, len(res))
			for i, x := range res {
				granted[i] = x.ok
			}
			return &rlock{r: r, n: n, val: val, token: uint64(token), start: start, ttl: req.TTL, minHold: holdArg(req), granted: granted}, verdict{}, nil
		}
		if validity <= 0 {
			errs = append(errs, fmt.Errorf("redlock: round took %v, longer than the validity of TTL %v", time.Since(start).Round(time.Millisecond), req.TTL))
		} else {
			errs = append(errs, fmt.Errorf("redlock: fencing token written to %d of %d masters, quorum %d: %w", fenced, len(r.nodes), r.quorum, ferr))
		}
		failed = len(r.nodes) // not a matter of waiting for another owner
	}

	// Failed: undo on every master, the ones that did not answer included
	// (their grant may just have been slow), before anyone waits or returns;
	// not where the request was never sent (a refused dial: !maybeRan),
	// where an undo would only spend another dial.
	// The undo wakes nobody: waiters wait on a majority holder, not on the
	// scattered grants of a failed round. (A master that granted took the
	// waiter out of its queue and woke the next one there; the waiter's
	// next round queues it again, at the back.) Where the undo cannot be
	// seen to have removed a grant, or a request of unknown outcome may yet
	// run, the master stays pending: settle goes on there if the
	// acquisition fails.
	sent := make([]bool, len(r.nodes))
	for i, x := range res {
		sent[i] = x.err == nil || maybeRan(x.err)
	}
	undone, _ := r.releaseOn(context.WithoutCancel(ctx), sent, n, val, false, nil, timeout)
	for i, x := range res {
		stuck := x.ok && undone[i] < 0
		if stuck || x.err != nil && maybeRan(x.err) && undone[i] != 1 {
			a.mark(i, len(r.nodes))
		}
		if stuck && !slices.Contains(a.stuck, i) {
			a.stuck = append(a.stuck, i)
		}
	}

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

// leaveUngranted takes a waiter that won its round out of the queues of
// the masters that did not grant it: a master that granted took it out
// (acquire_wait.lua), the others keep it queued, and, left there, its
// entry would take the wake-ups of the lock's next releases there until it
// went stale — a wake-up to nobody, while the waiter behind it slept until
// its holder's whole TTL ran out.
func (r *redlock) leaveUngranted(ctx context.Context, res []nodeResult, n names, waiter string, timeout time.Duration) {
	if !slices.ContainsFunc(res, func(x nodeResult) bool { return !x.ok }) {
		return
	}
	r.onAll(context.WithoutCancel(ctx), timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		if !res[i].ok {
			leaveScript.Run(ctx, c, []string{n.lock, n.queue, n.deadlines, n.sem}, waiter, r.wake)
		}
	})
}

// maybeRan reports whether a request that failed may have run, or may yet
// run, on its master: anything but a refused dial, a pool that gave no
// connection, or an error reply from the server.
func maybeRan(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return false
	}
	var re goredis.Error
	if errors.As(err, &re) {
		return false
	}
	return !errors.Is(err, goredis.ErrPoolTimeout) && !errors.Is(err, goredis.ErrClosed)
}

// raiseFences writes the token back before the lock counts: to every
// granting master whose proposal was lower (conditional on still holding
// the lock there), and to every master that answered without granting
// (unconditional: a fence only rises). It returns how many granting masters
// now hold the token, and why the others do not. A later majority meets this round's answering masters
// in at least one master, which proposes more unless it lost its counter;
// the token is carried forward by every master that answered, not just by
// the granting majority, so that when all answer, it takes a majority of
// masters losing their counters to lose it (redis/doc.go, Redlock).
func (r *redlock) raiseFences(ctx context.Context, res []nodeResult, n names, val string, token int64, timeout time.Duration) (int, error) {
	// The usual uncontended round: every master granted and took the
	// client's proposal. Nothing to write, and no goroutine to start.
	if !slices.ContainsFunc(res, func(x nodeResult) bool { return x.err == nil && (!x.ok || x.n != token) }) {
		fenced := 0
		for _, x := range res {
			if x.ok {
				fenced++
			}
		}
		return fenced, nil
	}
	var mu sync.Mutex
	var errs []error
	fenced := 0
	tok := strconv.FormatInt(token, 10)
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		switch {
		case res[i].err != nil:
			return
		case !res[i].ok:
			fenceScript.Run(ctx, c, []string{n.lock, n.fence}, "", tok)
			return
		case res[i].n != token:
			ok, err := fenceScript.Run(ctx, c, []string{n.lock, n.fence}, val, tok).Int64()
			if err == nil && ok != 1 {
				err = errors.New("the lock is no longer ours there")
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("master %d: fence: %w", i, err))
				mu.Unlock()
				return
			}
		}
		mu.Lock()
		fenced++
		mu.Unlock()
	})
	return fenced, errors.Join(errs...)
}

// releaseOn runs release.lua on the masters i with only[i] (all when only
// is nil) and returns what each answered: 1 released, 0 not held by val
// (and every master not asked), -1 failed. With wake, each master that
// released wakes the head of its queue: at most one waiter per master.
// hold is the lock's minimum hold (rlock's minHold), nil for none and for
// an undo, which deletes.
func (r *redlock) releaseOn(ctx context.Context, only []bool, n names, val string, wake bool, hold any, timeout time.Duration) ([]int8, error) {
	var mu sync.Mutex
	var errs []error
	var ch any = ""
	if wake {
		ch = r.wakeArg
	}
	keys := n.queueKeys()
	answers := make([]int8, len(r.nodes))
	r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		if only != nil && !only[i] {
			return
		}
		args := []any{val, ch}
		if hold != nil {
			args = append(args, "", "", hold)
		}
		x, e := releaseScript.Run(ctx, c, keys[:], args...).Int64()
		switch {
		case e != nil:
			answers[i] = -1
			mu.Lock()
			errs = append(errs, fmt.Errorf("master %d: %w", i, e))
			mu.Unlock()
		case x == 1:
			answers[i] = 1
		}
	})
	return answers, errors.Join(errs...)
}

// settle removes, in the background, what a failed acquisition may have
// left on its pending masters: a grant its undo could not reach, or a
// request that timed out on a master that was frozen or cut off, queued on
// its socket and run when it resumes — after the error returned, holding
// the key for a whole TTL if nobody removed it. settle sends the release
// (conditional on the owner value: it never touches another owner's lock)
// to each pending master with a backoff (50 ms doubling to 1 s) until the
// master released a lock, or answered twice that it holds none — the second
// answer to a request sent after the first answer came back, so that the
// server has by then run the requests that were queued on its sockets when
// it resumed. It gives up a TTL after the failure (a master still silent
// then, the key it is given later expires at its TTL and, alone, is no
// majority) and when the Locker closes. The acquisition is over: no later
// round of it can be given a lock under the same owner value.
func (r *redlock) settle(a *acquisition) {
	if a.pending == nil {
		return
	}
	r.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, a.req.TTL)
		defer cancel()
		answered := make([]int, len(r.nodes))
		d := 50 * time.Millisecond
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			res, _ := r.releaseOn(ctx, a.pending, a.n, a.val, true, nil, r.timeout(a.req.TTL))
			left := false
			for i, x := range res {
				if !a.pending[i] {
					continue
				}
				if x == 0 {
					answered[i]++
				}
				a.pending[i] = x < 0 || x == 0 && answered[i] < 2
				left = left || a.pending[i]
			}
			if !left {
				return
			}
			d = min(2*d, time.Second)
			t.Reset(d)
		}
	})
}

// background runs fn in a goroutine that Close cancels (through ctx) and
// waits for; false, without running it, once the Locker is closed. (The
// etcd backend's background has the same shape.)
func (r *redlock) background(fn func(ctx context.Context)) bool {
	r.bgMu.Lock()
	defer r.bgMu.Unlock()
	if r.closed {
		return false
	}
	r.bgWG.Add(1)
	go func() {
		defer r.bgWG.Done()
		fn(r.bgCtx)
	}()
	return true
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
// still one attempt: TryAcquire never waits for a holder. A round that
// fails for want of masters is retried as Acquire's are (retryRound): a
// burst of load, such as a new Locker's first round dialling every master,
// is not an outage.
const tryRounds = 3

func (r *redlock) TryAcquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer r.refusedByQuorum(&err)
	a := r.newAcquisition(req)
	defer func() {
		if err != nil {
			err = a.refusalLeftGrants(err)
			r.settle(a)
		}
	}()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for i := 1; ; i++ {
		start := time.Now()
		l, v, err := r.retryRound(ctx, a, "")
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

func (r *redlock) Acquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer r.refusedByQuorum(&err)
	a := r.newAcquisition(req)
	// One acquisition per key at a time in this Locker: its goroutines would
	// only split the masters between themselves.
	release, err := r.gates.Enter(ctx, a.n.tag)
	if err != nil {
		return nil, err
	}
	defer release()
	defer func() {
		if err != nil {
			r.settle(a)
		}
	}()
	l, _, err := r.retryRound(ctx, a, "")
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
		l, v, err := r.retryRound(ctx, a, w.id)
		if l != nil {
			return l, nil
		}
		if err != nil {
			r.leaveAll(ctx, a.n, w, req.TTL)
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
			r.leaveAll(ctx, a.n, w, req.TTL)
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
func (r *redlock) retryRound(ctx context.Context, a *acquisition, waiter string) (l driver.Lock, v verdict, err error) {
	err = r.retryFailed(ctx, a.req.TTL, func() error {
		l, v, err = r.round(ctx, a, waiter)
		return err
	})
	return l, v, err
}

// retryFailed runs round until it does not fail for want of masters, at
// most failedRounds times, separated by jitter; an ErrLeaseLost is an
// answer, not a failure, and ends it at once.
func (r *redlock) retryFailed(ctx context.Context, ttl time.Duration, round func() error) error {
	for i := 1; ; i++ {
		err := round()
		if err == nil || errors.Is(err, locker.ErrLeaseLost) || i == failedRounds || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(jitter(r.timeout(ttl), i-1, ttl))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
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
	r.bgMu.Lock()
	r.closed = true
	r.bgMu.Unlock()
	r.bgCancel()
	// go-redis does not end a read when its context is cancelled, only at
	// the deadline: a background call to a silent master (a refresh batch,
	// whose deadline is a third of the TTL away) would hold Close until
	// then. Clients the Locker owns are closed first, which closes their
	// connections and ends such reads at once; the caller's own clients
	// are left open, and Close waits for the deadline.
	var errs []error
	if r.closeClient {
		for _, c := range r.owned { // duplicates too; a second Close says ErrClosed
			if err := c.Close(); err != nil && !errors.Is(err, goredis.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	r.bgWG.Wait()
	r.watches.close()
	for _, s := range r.subs {
		if err := s.close(); err != nil && !(r.closeClient && errors.Is(err, goredis.ErrClosed)) {
			errs = append(errs, err)
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
	// minHold is as lock's: each master keeps the lock until its own grant
	// time plus the hold, and a release before then leaves it so.
	minHold any
	granted []bool // the masters that granted it
}

// MinHolds implements driver.MinHolds: every master keeps the lock for the
// minimum hold since its own grant, so a majority holds it that long.
func (r *redlock) MinHolds() {}

func (l *rlock) Token() uint64    { return l.token }
func (l *rlock) Start() time.Time { return l.start }

// Refresh extends the lock on every master that still holds it; it succeeds
// when a majority did so within the validity the new TTL gives, counted
// from before the first request.
func (l *rlock) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer l.r.refusedByQuorum(&err)
	start := time.Now()
	// A refresh does not spend the validity of a new grant: the deadline
	// counts from before it was sent. So a master may take up to the refresh
	// interval (a third of the TTL) to answer, not just the node timeout.
	args := []any{ttlMillis(ttl)}
	if l.minHold != nil {
		args = append(args, l.minHold)
	}
	err = l.refreshAll(ctx, max(l.r.timeout(ttl), ttl/3), args...)
	if err == nil && time.Since(start) >= ttl-driver.DriftMargin(ttl) {
		return fmt.Errorf("redlock: refresh took %v, longer than the validity of TTL %v", time.Since(start).Round(time.Millisecond), ttl)
	}
	return err
}

// refreshAll runs refresh.lua (arguments the owner value and args) on
// every master, in each master's next pipelined batch (scriptBatch), and
// tallies the answers as onHolders does. It returns once the answers still
// to come cannot change the verdict: a silent master's call goes on to its
// deadline in the background, and a refresh that a quorum has answered does
// not wait for it.
func (l *rlock) refreshAll(ctx context.Context, timeout time.Duration, args ...any) error {
	args = append([]any{l.val}, args...)
	keys := []string{l.n.lock}
	answered := make(chan *batchCall, len(l.r.nodes))
	for i, b := range l.r.refreshes {
		b.start(timeout, answered, i, keys, args...)
	}
	var t holderTally
	heard := make([]bool, len(l.r.nodes))
	for pending := len(l.r.nodes); !t.decided(l.r, pending); pending-- {
		select {
		case c := <-answered:
			heard[c.id] = true
			t.add(c.id, c.res, c.err)
		case <-ctx.Done():
			for i, ok := range heard {
				if !ok {
					t.add(i, 0, ctx.Err())
				}
			}
			return t.verdict(l.r, "refreshed")
		}
	}
	return t.verdict(l.r, "refreshed")
}

// holderTally counts the masters' answers to a script run on every master
// that holds a lock: 1 when done, 0 when the lock is not the caller's.
type holderTally struct {
	mu       sync.Mutex
	ok, lost int
	errs     []error
}

func (t *holderTally) add(i int, x int64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		t.errs = append(t.errs, fmt.Errorf("master %d: %w", i, err))
	case x == 1:
		t.ok++
	default:
		t.lost++
	}
}

// decided reports whether the verdict is known with pending masters yet to
// answer: whatever they say, it will not change.
func (t *holderTally) decided(r *redlock, pending int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	canSucceed := t.ok+pending >= r.quorum
	canBeLost := t.lost+pending > len(r.nodes)-r.quorum
	return t.ok >= r.quorum || t.lost > len(r.nodes)-r.quorum || !canSucceed && !canBeLost
}

// verdict: nil when a majority did it; ErrLeaseLost when no majority holds
// the lock for this owner any more; otherwise an error saying what the
// masters answered.
func (t *holderTally) verdict(r *redlock, done string) error {
	switch {
	case t.ok >= r.quorum:
		return nil
	case t.lost > len(r.nodes)-r.quorum:
		return locker.ErrLeaseLost
	}
	return fmt.Errorf("redlock: %s on %d of %d masters, quorum %d: %w", done, t.ok, len(r.nodes), r.quorum, errors.Join(t.errs...))
}

// onHolders runs script (refresh.lua, publish.lua: key the lock,
// arguments the owner value and arg; 1 when done, 0 when the lock is not
// the caller's) on every master. It succeeds when a majority did it,
// reports ErrLeaseLost when no majority holds the lock for this owner any
// more, and otherwise an error saying what the masters answered.
func (l *rlock) onHolders(ctx context.Context, done string, timeout time.Duration, script *goredis.Script, args ...any) error {
	args = append([]any{l.val}, args...)
	var t holderTally
	l.r.onAll(ctx, timeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		x, err := script.Run(ctx, c, []string{l.n.lock}, args...).Int64()
		t.add(i, x, err)
	})
	return t.verdict(l.r, done)
}

// Release deletes the lock on every master that holds it. It reports
// ErrLeaseLost when no majority held it any more, and an error when too
// many masters failed to tell.
//
// A round whose verdict waits on masters that did not answer in time is
// sent again to those masters only, as a grant's (retryFailed). A master
// that granted the lock and holds nothing when asked again counts as
// released: its first request may have run after the caller gave up on
// it, and before the lease's deadline nothing else removes the lock from
// a master that granted it (within the guarantee).
func (l *rlock) Release(ctx context.Context) (err error) {
	defer l.r.refusedByQuorum(&err)
	var answers []int8
	return l.r.retryFailed(ctx, l.ttl, func() error {
		var again []bool // nil: every master
		if answers != nil {
			again = make([]bool, len(answers))
			for i, x := range answers {
				again[i] = x < 0
			}
		}
		got, err := l.r.releaseOn(ctx, again, l.n, l.val, true, l.minHold, l.r.timeout(l.ttl))
		if answers == nil {
			answers = got
		} else {
			for i := range answers {
				if again[i] {
					answers[i] = got[i]
					if got[i] == 0 && l.granted[i] {
						answers[i] = 1
					}
				}
			}
		}
		return l.releaseVerdict(answers, err)
	})
}

// releaseVerdict judges the masters' answers to a release (1 released, 0
// held nothing, -1 failed with err).
func (l *rlock) releaseVerdict(answers []int8, err error) error {
	var released, failed int
	for _, x := range answers {
		switch x {
		case 1:
			released++
		case -1:
			failed++
		}
	}
	switch {
	case released >= l.r.quorum:
		return nil
	case released+failed >= l.r.quorum:
		return fmt.Errorf("redlock: released on %d of %d masters, %d failed: %w", released, len(l.r.nodes), failed, err)
	}
	return locker.ErrLeaseLost
}
