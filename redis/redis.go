package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/places"
	goredis "github.com/redis/go-redis/v9"
)

// New returns a Locker over one Redis deployment: a single server, a
// Sentinel-managed master (goredis.NewFailoverClient) or a Cluster
// (goredis.NewClusterClient). opts are locker's options and this package's
// (WithPrefix, WithAcceptEviction). The client stays the caller's: Close
// does not close it.
//
// go-redis ignores context deadlines unless the client was made with
// ContextTimeoutEnabled; without it a call may outlive its context by the
// client's read timeout. Clients made by Open have it on.
func New(client goredis.UniversalClient, opts ...locker.Option) (locker.Locker, error) {
	return newLocker(opts, func(cfg config) (*backend, error) { return newBackend(client, cfg) })
}

// base is what the single and Redlock backends share.
type base struct {
	prefix  string
	wake    string // the wake-up channel prefix the scripts publish under
	wakeArg any    // wake as a script argument, boxed once
	hub     *hub
	watches *watches
}

func newBase(cfg config) (base, error) {
	p := cfg.Prefix
	return base{prefix: p, wake: channelPrefix(p), wakeArg: channelPrefix(p), hub: newHub(), watches: &watches{}}, nil
}

// subscriber returns the subscription of this Locker's wake-up channel on c.
func (b *base) subscriber(c goredis.UniversalClient) *subscriber {
	return &subscriber{client: c, channel: b.wake + b.hub.id, hub: b.hub}
}

// acquireArgs are acquire.lua's keys and arguments for one attempt of req;
// waiter is "" for an attempt that does not queue, which touches neither
// the queue nor the wake-up channels, and so names only the lock and fence
// keys and sends two arguments (three with a published value): it is the
// uncontended path.
func (b *base) acquireArgs(n names, req *driver.Request, val string, waiter string) ([]string, []any) {
	switch {
	case waiter == "" && req.Value == "":
		return []string{n.lock, n.fence}, []any{val, serverTTL(req)}
	case waiter == "":
		return []string{n.lock, n.fence}, []any{val, serverTTL(req), req.Value}
	}
	return []string{n.lock, n.fence, n.queue, n.deadlines},
		[]any{val, serverTTL(req), req.Value, b.wakeArg, waiter, staleAfter(req.TTL)}
}

// heartbeatArgs are acquire.lua's keys and arguments for a waiter that
// renews its entry (New's): its liveness replaces the PTTL-based one.
func (b *base) heartbeatArgs(n names, req *driver.Request, val string, waiter string) ([]string, []any) {
	keys, args := b.acquireArgs(n, req, val, waiter)
	if waiter == "" {
		return keys, args
	}
	return keys, append(args, waiterLiveness.Milliseconds())
}

// queueKeys are the keys of release.lua (an array: a held lock keeps them,
// and its release slices them without allocating).
func (n names) queueKeys() [4]string { return [4]string{n.lock, n.queue, n.deadlines, n.fence} }

// RoundTTL implements driver.TTLRounder: PX counts whole milliseconds.
func (b *base) RoundTTL(ttl time.Duration) (time.Duration, error) { return roundTTL(ttl) }

// value is the owner value a lock key starts with, framed (take.lua): the
// owner id, which refresh and release compare, and the label, for
// inspection, after their length and a colon. The grant time and the
// published value (req.Value) follow it in the key: Publish replaces the
// value while refresh and release go on comparing this prefix.
func value(req *driver.Request) string {
	// The id is 32 hex digits: the length is known before the string is made.
	return strconv.Itoa(len(req.Label)+33) + ":" + req.Owner.String() + " " + req.Label
}

// ownerValue is the owner value in a holder as the scripts report it:
// without its frame, or all of it when it has none.
func ownerValue(holder string) string {
	n, rest, ok := strings.Cut(holder, ":")
	if l, err := strconv.Atoi(n); ok && err == nil && l == len(rest) {
		return rest
	}
	return holder
}

// backend is the single-deployment backend.
type backend struct {
	base
	client      goredis.UniversalClient
	eviction    evictionCheck
	sub         *subscriber
	places      *places.Set // by lock key: see maxQueued
	closeClient bool
}

// maxQueued is how many of one Locker's Acquires of one lock wait in the
// lock's queue in Redis at a time; its further Acquires of the lock wait in
// the process, in arrival order, for one of those places. Every queued
// waiter renews its entry every heartbeatEvery: without a bound, 1,000
// waiters in one Locker cost the server 5,000 scripts a second whatever
// the handoffs (measured: 1.5–9.8 ms of server CPU per grant at W = 1,000,
// against 0.1–0.2 ms at W = 1; docs/design/redis.md, Waiting).
const maxQueued = 8

func newBackend(client goredis.UniversalClient, cfg config) (*backend, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
	}
	bs, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	b := &backend{base: bs, client: client, closeClient: cfg.CloseClients, places: places.New(maxQueued),
		eviction: evictionCheck{accept: cfg.AcceptEviction, logger: cfg.Logger}}
	b.sub = b.subscriber(client)
	return b, nil
}

func (b *backend) Name() string { return "redis" }

// attempt runs acquire.lua once, for waiter (queued if it fails) or, with
// "", without queueing. It returns the lock, or the holder's remaining TTL
// when another owner holds it.
func (b *backend) attempt(ctx context.Context, req *driver.Request, n names, waiter string) (driver.Lock, time.Duration, error) {
	if err := b.eviction.check(ctx, b.client); err != nil {
		return nil, 0, err
	}
	if req.Limit > 1 {
		return b.attemptPermit(ctx, req, n, waiter)
	}
	start := time.Now()
	val := value(req)
	keys, args := b.heartbeatArgs(n, req, val, waiter)
	v, err := acquireScript.Run(ctx, b.client, keys, args...).Result()
	ok, x, err := pair(v, err)
	if err != nil {
		if outcomeUnknown(err) {
			b.cleanup(ctx, n, val, req.TTL)
		}
		return nil, 0, err
	}
	if !ok {
		if h := holderOf(v); strings.HasPrefix(h, "#") {
			return nil, 0, limitMismatch(h[1:], req.Limit)
		}
		return nil, time.Duration(x) * time.Millisecond, nil
	}
	// The owner value and the token as the request boxed them and the reply
	// brought it (in decimal, as the fence holds it): the lock's scripts
	// send them as they are, boxing nothing again.
	return &lock{b: b, keys: n.queueKeys(), val: args[0], token: uint64(x), tokenArg: v, start: start, minHold: holdArg(req)}, 0, nil
}

// outcomeUnknown reports whether a failed request may have run on the
// server: every error after the request may have been sent (a timeout, the
// context ending, EOF, a reset connection). Only a reply of the server's
// own, and errors before sending (a failed dial, a closed client, no
// connection free in the pool), say it did not run.
func outcomeUnknown(err error) bool {
	var reply goredis.Error
	var op *net.OpError
	switch {
	case errors.As(err, &reply) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
		return false // the server answered
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, goredis.ErrClosed), errors.Is(err, goredis.ErrPoolTimeout):
		return false
	}
	return true
}

// cleanupTimeout bounds the clean-up of an acquisition whose outcome is
// unknown, and the settling of a release's: they run after the caller's
// context ended, or its request failed, so they have their own.
const cleanupTimeout = 2 * time.Second

// settle runs op, a request safe to repeat, until the server answers it or
// cleanupTimeout has passed, whatever ctx says: it finishes a request
// whose first try had an unknown outcome.
func settle(ctx context.Context, op func(context.Context) (int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	pause := 20 * time.Millisecond
	for {
		n, err := op(ctx)
		if err == nil || !outcomeUnknown(err) && !errors.Is(err, goredis.ErrPoolTimeout) {
			return n, err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return n, err
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// cleanup deletes the lock of owner value val if the request that failed did
// take it, and, if the lock is free, keeps it from that request for a while
// should it still land (min(ttl, cleanupTimeout)). It is conditional on the
// owner, so it never touches anyone else's lock.
func (b *backend) cleanup(ctx context.Context, n names, val string, ttl time.Duration) {
	keys := n.queueKeys()
	guard := ttlMillis(min(ttl, cleanupTimeout))
	_, _ = settle(ctx, func(ctx context.Context) (int64, error) {
		return releaseScript.Run(ctx, b.client, keys[:], val, b.wakeArg, "", guard).Int64()
	})
}

// leave takes a waiter that gives up out of the lock's queue, best effort
// and, like cleanup, with its own timeout: the caller's context has usually
// ended. An entry it cannot remove (Redis unreachable) goes stale and is
// skipped by the next release.
func (b *base) leave(ctx context.Context, c goredis.UniversalClient, n names, w *waiter) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	leaveScript.Run(ctx, c, []string{n.lock, n.queue, n.deadlines, n.sem}, w.id, b.wake)
}

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer refusedTo(&err)
	l, _, err := b.attempt(ctx, req, b.names(req.Key), "")
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, locker.ErrLocked
	}
	return l, nil
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer refusedTo(&err)
	n := b.names(req.Key)
	// The uncontended path is one round trip: no subscription, no queue.
	l, _, err := b.attempt(ctx, req, n, "")
	if l != nil || err != nil {
		return l, err
	}
	leave, err := b.places.Enter(ctx, n.lock)
	if err != nil {
		return nil, err
	}
	defer leave()
	w := b.hub.add()
	defer b.hub.remove(w)
	if err := b.sub.ensure(ctx); err != nil {
		return nil, err
	}
	defer w.stopTimer()
	for {
		// Registered and subscribed: from here no wake-up goes unnoticed.
		// The attempt queues the waiter (or keeps its place) if it fails.
		l, pttl, err := b.attempt(ctx, req, n, w.id)
		if l != nil {
			return l, nil
		}
		if err != nil {
			b.leave(ctx, b.client, n, w)
			return nil, err
		}
		if err := b.wait(ctx, n, w, fallbackWait(pttl, req.TTL)); err != nil {
			b.leave(ctx, b.client, n, w)
			return nil, err
		}
	}
}

// wait blocks until w is woken, its fallback wait d has passed, its
// heartbeat says to try now, or ctx ends; meanwhile it renews w's queue
// entry every heartbeatEvery.
func (b *backend) wait(ctx context.Context, n names, w *waiter, d time.Duration) error {
	end := time.Now().Add(d)
	keys := []string{n.lock, n.queue, n.deadlines, n.sem}
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		woken, err := w.waitWoken(ctx, min(left, heartbeatEvery))
		if woken || err != nil {
			return err
		}
		if time.Now().After(end) {
			return nil
		}
		// A failed heartbeat is no error: the entry may go stale, and the
		// fallback wait still ends. One later than the liveness is useless.
		bctx, cancel := context.WithTimeout(ctx, waiterLiveness)
		r, err := beatScript.Run(bctx, b.client, keys, w.id, waiterLiveness.Milliseconds()).Int64()
		cancel()
		if err == nil && r != 0 {
			return nil
		}
	}
}

func (b *backend) Close() error {
	b.watches.close()
	err := b.sub.close()
	if b.closeClient {
		if cerr := b.client.Close(); cerr != nil && !errors.Is(cerr, goredis.ErrClosed) {
			err = errors.Join(err, cerr)
		}
	}
	return err
}

// lock is a lock held on one deployment.
type lock struct {
	b        *backend
	keys     [4]string // queueKeys: keys[0] is the lock
	val      any       // the owner value (a string)
	token    uint64
	tokenArg any // token in decimal (a string), for release.lua
	start    time.Time
	// minHold is the minimum hold in ms for refresh.lua and release.lua,
	// or nil for none: then they run exactly as without the ability.
	minHold any
}

func (l *lock) Token() uint64 { return l.token }

func (l *lock) Start() time.Time { return l.start }

func (l *lock) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer refusedTo(&err)
	args := []any{l.val, ttlMillis(ttl)}
	if l.minHold != nil {
		args = append(args, l.minHold)
	}
	n, err := refreshScript.Run(ctx, l.b.client, l.keys[:1], args...).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}

// release runs release.lua once.
func (l *lock) release(ctx context.Context) (int64, error) {
	if l.minHold != nil {
		return releaseScript.Run(ctx, l.b.client, l.keys[:], l.val, l.b.wakeArg, l.tokenArg, "", l.minHold).Int64()
	}
	return releaseScript.Run(ctx, l.b.client, l.keys[:], l.val, l.b.wakeArg, l.tokenArg).Int64()
}

// Release deletes the lock. It is safe to repeat (release.lua knows its own
// release again by the token in the fence), so a release whose outcome is
// unknown is settled by running it again.
func (l *lock) Release(ctx context.Context) (err error) {
	defer refusedTo(&err)
	n, err := l.release(ctx)
	if err != nil && outcomeUnknown(err) {
		n, err = settle(ctx, l.release)
	}
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}
