package locker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/distlock/locker/driver"
	"go.opentelemetry.io/otel/trace"
)

// cleanupTimeout bounds the background work done on a lease's behalf after it
// ended (best-effort release on Close, Expire): it never waits on a dead
// backend for long.
const cleanupTimeout = 5 * time.Second

// client is the portable Locker over one driver.Backend.
type client struct {
	b       driver.Backend
	name    string
	opts    options
	rounder driver.TTLRounder
	permits bool             // the backend implements driver.Permits
	pub     driver.Publisher // the backend as a Publisher, or nil
	minHold bool             // the backend implements driver.MinHolds
	log     *slog.Logger
	tel     *telemetry

	// ctx is cancelled by Close: it stops in-flight acquisitions and the
	// background work of every lease.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // in-flight acquisitions and background goroutines

	mu     sync.Mutex
	closed bool
	leases map[*lease]struct{}
}

// New returns a Locker over a backend. Backends wrap it in their own
// constructors (redis.New, etcd.New …); use it directly only to run a backend
// of your own. The options set Locker-wide defaults. On error the caller still
// owns b.
func New(b driver.Backend, opts ...Option) (Locker, error) {
	o := defaultOptions()
	o.apply(opts)
	o.foreign(b.Name())
	if o.err != nil {
		return nil, fmt.Errorf("%s: new: %w", b.Name(), o.err)
	}
	c := &client{b: b, name: b.Name(), opts: o, leases: map[*lease]struct{}{}}
	c.rounder, _ = b.(driver.TTLRounder)
	_, c.permits = b.(driver.Permits)
	c.pub, _ = b.(driver.Publisher)
	_, c.minHold = b.(driver.MinHolds)
	c.log = o.logger
	if c.log == nil {
		c.log = discard
	}
	if _, err := c.roundTTL(o.ttl); err != nil {
		return nil, fmt.Errorf("%s: new: %w", c.name, err)
	}
	tel, err := newTelemetry(c.name, &o)
	if err != nil {
		return nil, fmt.Errorf("%s: new: %w: OpenTelemetry instruments: %w", c.name, ErrInvalidOption, err)
	}
	c.tel = tel
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// roundTTL applies the backend's TTL rules; an error always wraps
// ErrInvalidOption.
func (c *client) roundTTL(ttl time.Duration) (time.Duration, error) {
	if c.rounder == nil {
		return ttl, nil
	}
	r, err := c.rounder.RoundTTL(ttl)
	switch {
	case err != nil && !errors.Is(err, ErrInvalidOption):
		return 0, fmt.Errorf("%w: TTL %v: %w", ErrInvalidOption, ttl, err)
	case err != nil:
		return 0, err
	case r < ttl:
		// The contract: rounded up, never silently shortened.
		return 0, fmt.Errorf("%w: backend would shorten TTL %v to %v", ErrInvalidOption, ttl, r)
	}
	return r, nil
}

func (c *client) Acquire(ctx context.Context, key string, opts ...Option) (Lease, error) {
	return c.instrumented(ctx, 0, key, opts, c.b.Acquire, lateGrantAttempts)
}

func (c *client) TryAcquire(ctx context.Context, key string, opts ...Option) (Lease, error) {
	return c.instrumented(ctx, 1, key, opts, c.b.TryAcquire, 1)
}

// spanNames are the span names of ops (telemetry.go).
var spanNames = [len(ops)]string{"locker.Acquire", "locker.TryAcquire"}

// instrumented runs acquire (op: an index into ops) in a span and records
// its duration and outcome.
func (c *client) instrumented(ctx context.Context, op int, key string, opts []Option, do acquireFunc, attempts int) (Lease, error) {
	start := time.Now()
	ctx, span := c.tel.start(ctx, spanNames[op], key)
	l, err := c.acquire(ctx, ops[op], key, opts, do, attempts)
	c.tel.acquired(ctx, op, key, start, err)
	var token uint64
	if err == nil {
		token = l.Token()
	}
	c.tel.end(span, err, token)
	return l, err
}

// lateGrantAttempts bounds the grants a blocking Acquire may receive after
// their own deadline (the backend slower than the TTL for a moment, as a
// cluster is just after a partition heals) before it reports ErrLeaseLost:
// each such grant is given back and the wait starts over. A TTL that is
// always too short for the backend still fails, rather than spinning until
// the context ends. TryAcquire never retries.
const lateGrantAttempts = 3

type acquireFunc func(context.Context, *driver.Request) (driver.Lock, error)

func (c *client) acquire(ctx context.Context, op, key string, opts []Option, do acquireFunc, attempts int) (Lease, error) {
	o := c.opts
	o.perCall(opts)
	if o.err != nil {
		return nil, &opError{c.name, op, key, o.err}
	}
	if err := ValidateKey(key); err != nil {
		return nil, &opError{c.name, op, key, err}
	}
	ttl, err := c.roundTTL(o.ttl)
	if err != nil {
		return nil, &opError{c.name, op, key, err}
	}
	if o.limit > 1 && !c.permits {
		return nil, &opError{c.name, op, key, fmt.Errorf("%w: a limit of %d holders (WithLimit)", ErrUnsupported, o.limit)}
	}
	if o.minHold > 0 && !c.minHold {
		return nil, &opError{c.name, op, key, fmt.Errorf("%w: a minimum hold (WithMinHold)", ErrUnsupported)}
	}
	if o.value != "" && c.pub == nil {
		return nil, &opError{c.name, op, key, fmt.Errorf("%w: a published value (WithValue)", ErrUnsupported)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &opError{c.name, op, key, err}
	}
	if !c.begin() {
		return nil, &opError{c.name, op, key, ErrClosed}
	}
	defer c.wg.Done()

	// Close cancels in-flight acquisitions through this context.
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })
	defer stop()

	stored := storedKey(o.namespace, key)
	for attempt := 1; ; attempt++ {
		l := &lease{c: c, key: key, ttl: ttl, autoRefresh: o.autoRefresh, done: make(chan struct{})}
		req := &driver.Request{Key: stored, Owner: driver.NewOwnerID(), Label: o.owner, Value: o.value, TTL: ttl, MinHold: o.minHold, Limit: o.limit, Lost: l.lost}
		dl, err := do(actx, req)
		if err != nil {
			if errors.Is(context.Cause(actx), ErrClosed) && ctx.Err() == nil {
				err = ErrClosed
			}
			return nil, wrapError(ctx, c.name, op, key, err)
		}
		err = c.hold(l, dl)
		if err == nil {
			return l, nil
		}
		c.giveBack(ctx, key, dl)
		if !errors.Is(err, errLateGrant) || attempt >= attempts || actx.Err() != nil {
			return nil, &opError{c.name, op, key, err}
		}
		trace.SpanFromContext(ctx).AddEvent("late grant given back")
		c.log.LogAttrs(ctx, slog.LevelInfo, "locker: a grant arrived after its own deadline; given back, waiting again",
			slog.String("backend", c.name), slog.String("key", key), slog.Uint64("token", dl.Token()))
	}
}

// giveBack releases a granted lock that never became a lease, with a
// timeout of its own: the caller's context may be about to end. If the
// release fails, the lock is expired as a lost lease's is (lease.expire):
// its deadline has passed, or the backend reported it lost, and an entry
// that outlives the TTL on the server (an etcd key on the shared lease the
// Locker keeps renewing, a ZooKeeper node in a live session) would
// otherwise keep the lock from everyone until the Locker closes.
func (c *client) giveBack(ctx context.Context, key string, dl driver.Lock) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer rcancel()
	err := dl.Release(rctx)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "locker: could not give back a granted lock; the backend expires it",
		slog.String("backend", c.name), slog.String("key", key), slog.Uint64("token", dl.Token()), slog.Any("err", err))
	c.expireLater(dl)
}

// expireLater has the backend expire dl's entry in the background, if dl
// is a driver.Expirer (the server's TTL frees any other lock). It does
// nothing once the Locker is closed: closing the backend ends the entry.
func (c *client) expireLater(dl driver.Lock) {
	x, ok := dl.(driver.Expirer)
	if !ok {
		return
	}
	c.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
		x.Expire(ctx)
	})
}

// begin registers an in-flight call; false once the Locker is closed.
func (c *client) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// hold starts a granted lease and tracks it, unless the Locker closed
// meanwhile or the backend already reported the lock lost.
func (c *client) hold(l *lease, dl driver.Lock) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := l.start(dl); err != nil {
		return err
	}
	c.leases[l] = struct{}{}
	return nil
}

func (c *client) forget(l *lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}

// background runs fn in a goroutine that Close waits for.
func (c *client) background(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
	}()
}

func (c *client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	held := make([]*lease, 0, len(c.leases))
	for l := range c.leases {
		held = append(held, l)
	}
	c.mu.Unlock()

	// Leases end first, so that Done closes at once and in-flight refreshes
	// cancelled below cannot blame the cancellation.
	for _, l := range held {
		l.closeLocker()
	}
	c.cancel()
	var wg sync.WaitGroup
	for _, l := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
			defer cancel()
			l.cleanup(ctx)
		}()
	}
	wg.Wait()
	c.wg.Wait()
	if err := c.b.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", c.name, err)
	}
	return nil
}
