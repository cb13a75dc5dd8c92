package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// Config holds the settings of this package that are not Locker options.
// The zero value is the default.
type Config struct {
	// Prefix starts the name of every Redis key and channel the Locker uses
	// (default DefaultPrefix). It may not contain '{' or '}'. Lockers that
	// should exclude each other must use the same prefix.
	Prefix string

	// NodeTimeout bounds each request to one Redlock master (default: a
	// tenth of the lease's TTL, at most 250 ms), so that a slow or dead
	// master costs a round little of the lease's validity. Unused by New.
	NodeTimeout time.Duration

	// CloseClients makes Locker.Close close the client(s) given to the
	// constructor. Off by default: the caller owns its clients. Open sets it
	// for the clients it makes.
	CloseClients bool

	// allowFewMasters lets a Redlock run on 1 or 2 distinct masters (URL
	// allow_few_masters=true); by default it needs 3.
	allowFewMasters bool
}

func (c Config) prefix() (string, error) {
	if c.Prefix == "" {
		return DefaultPrefix, nil
	}
	return c.Prefix, checkPrefix(c.Prefix)
}

// New returns a Locker over one Redis deployment: a single server, a
// Sentinel-managed master (goredis.NewFailoverClient) or a Cluster
// (goredis.NewClusterClient). The options set Locker-wide defaults. The
// client stays the caller's: Close does not close it.
//
// go-redis ignores context deadlines unless the client was made with
// ContextTimeoutEnabled; without it a call may outlive its context by the
// client's read timeout. Clients made by Open have it on.
func New(client goredis.UniversalClient, opts ...locker.Option) (locker.Locker, error) {
	return NewWith(client, Config{}, opts...)
}

// NewWith is New with the settings of cfg.
func NewWith(client goredis.UniversalClient, cfg Config, opts ...locker.Option) (locker.Locker, error) {
	b, err := newBackend(client, cfg)
	if err != nil {
		return nil, err
	}
	return locker.New(b, opts...)
}

// base is what the single and Redlock backends share.
type base struct {
	prefix  string
	wake    string // the wake-up channel prefix the scripts publish under
	wakeArg any    // wake as a script argument, boxed once
	hub     *hub
}

func newBase(cfg Config) (base, error) {
	p, err := cfg.prefix()
	if err != nil {
		return base{}, err
	}
	return base{prefix: p, wake: channelPrefix(p), wakeArg: channelPrefix(p), hub: newHub()}, nil
}

// subscriber returns the subscription of this Locker's wake-up channel on c.
func (b *base) subscriber(c goredis.UniversalClient) *subscriber {
	return &subscriber{client: c, channel: b.wake + b.hub.id, hub: b.hub}
}

// acquireArgs are acquire.lua's keys and arguments for one attempt; waiter
// is "" for an attempt that does not queue, which touches neither the queue
// nor the wake-up channels, and so names only the lock and fence keys and
// sends two arguments: it is the uncontended path.
func (b *base) acquireArgs(n names, val string, ttl time.Duration, waiter string) ([]string, []any) {
	if waiter == "" {
		return []string{n.lock, n.fence}, []any{val, ttlMillis(ttl)}
	}
	return []string{n.lock, n.fence, n.queue, n.deadlines}, []any{val, ttlMillis(ttl), b.wakeArg, waiter, staleAfter(ttl)}
}

// queueKeys are the keys of release.lua and leave.lua (an array: a held lock
// keeps them, and its release slices them without allocating).
func (n names) queueKeys() [3]string { return [3]string{n.lock, n.queue, n.deadlines} }

// RoundTTL implements driver.TTLRounder: PX counts whole milliseconds.
func (b *base) RoundTTL(ttl time.Duration) (time.Duration, error) { return roundTTL(ttl) }

// value is what a lock key holds: the owner id, which refresh and release
// compare, and the label, for whoever inspects the key with redis-cli.
func value(req *driver.Request) string { return req.Owner.String() + " " + req.Label }

// backend is the single-deployment backend.
type backend struct {
	base
	client      goredis.UniversalClient
	sub         *subscriber
	closeClient bool
}

func newBackend(client goredis.UniversalClient, cfg Config) (*backend, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
	}
	bs, err := newBase(cfg)
	if err != nil {
		return nil, err
	}
	b := &backend{base: bs, client: client, closeClient: cfg.CloseClients}
	b.sub = b.subscriber(client)
	return b, nil
}

func (b *backend) Name() string { return "redis" }

// attempt runs acquire.lua once, for waiter (queued if it fails) or, with
// "", without queueing. It returns the lock, or the holder's remaining TTL
// when another owner holds it.
func (b *backend) attempt(ctx context.Context, req *driver.Request, n names, waiter string) (driver.Lock, time.Duration, error) {
	start := time.Now()
	val := value(req)
	keys, args := b.acquireArgs(n, val, req.TTL, waiter)
	ok, x, err := pair(acquireScript.Run(ctx, b.client, keys, args...).Result())
	if err != nil {
		if outcomeUnknown(ctx, err) {
			b.cleanup(ctx, n, val)
		}
		return nil, 0, err
	}
	if !ok {
		return nil, time.Duration(x) * time.Millisecond, nil
	}
	return &lock{b: b, keys: n.queueKeys(), val: val, token: uint64(x), start: start}, 0, nil
}

// outcomeUnknown reports whether a failed request may have run on the server:
// the context ended or a timeout struck after it was sent. A refused
// connection or a server error reply means it did not.
func outcomeUnknown(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// cleanupTimeout bounds the clean-up of an acquisition whose outcome is
// unknown. It runs after the caller's context ended, so it has its own.
const cleanupTimeout = 2 * time.Second

// cleanup deletes the lock of owner value val if the request that failed did
// take it. It is conditional on the owner, so it never touches anyone else's
// lock.
func (b *backend) cleanup(ctx context.Context, n names, val string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	keys := n.queueKeys()
	releaseScript.Run(ctx, b.client, keys[:], val, b.wakeArg)
}

// leave takes a waiter that gives up out of the lock's queue, best effort
// and, like cleanup, with its own timeout: the caller's context has usually
// ended. An entry it cannot remove (Redis unreachable) goes stale and is
// skipped by the next release.
func (b *base) leave(ctx context.Context, c goredis.UniversalClient, n names, w *waiter) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	keys := n.queueKeys()
	leaveScript.Run(ctx, c, keys[:], w.id, b.wake)
}

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	l, _, err := b.attempt(ctx, req, b.names(req.Key), "")
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, locker.ErrLocked
	}
	return l, nil
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	n := b.names(req.Key)
	// The uncontended path is one round trip: no subscription, no queue.
	l, _, err := b.attempt(ctx, req, n, "")
	if l != nil || err != nil {
		return l, err
	}
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
		if err := w.wait(ctx, fallbackWait(pttl, req.TTL)); err != nil {
			b.leave(ctx, b.client, n, w)
			return nil, err
		}
	}
}

func (b *backend) Close() error {
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
	b     *backend
	keys  [3]string // queueKeys: keys[0] is the lock
	val   string
	token uint64
	start time.Time
}

func (l *lock) Token() uint64    { return l.token }
func (l *lock) Start() time.Time { return l.start }

func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	n, err := refreshScript.Run(ctx, l.b.client, l.keys[:1], l.val, ttlMillis(ttl)).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}

func (l *lock) Release(ctx context.Context) error {
	n, err := releaseScript.Run(ctx, l.b.client, l.keys[:], l.val, l.b.wakeArg).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}
