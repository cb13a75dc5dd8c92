package locker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/distlock/locker/driver"
)

type leaseState int

const (
	pending leaseState = iota // granted by the backend, not yet started
	held
	released
	lost
)

// lease is the portable Lease over one driver.Lock. It owns the local
// deadline, Done/Err and, with automatic refresh, the refresh schedule: two
// timers, and no goroutine of its own while it is held.
type lease struct {
	c           *client
	key         string
	ttl         time.Duration
	autoRefresh bool
	done        chan struct{}

	// ops serializes the calls into the driver for this lease, honouring the
	// caller's context while waiting for a turn.
	ops chan struct{}

	mu       sync.Mutex
	dl       driver.Lock
	token    uint64
	state    leaseState
	err      error
	deadline time.Time
	granted  time.Time // when start ran, for the hold-time metric
	timer    *time.Timer
	// refresher runs autoRefreshOnce. It counts once in c.wg while armed or
	// running: Done comes from end when its Stop disarms it, or else from the
	// run that does not re-arm it, so that Close waits for a refresh under way.
	refresher   *time.Timer
	pendingLoss error // a loss the backend reported before start
	cleaned     bool  // the driver's Release was tried after the loss
	expired     bool  // the driver's Expire was called
}

// GrantedTTL returns the TTL a lease of this package was granted with: the
// TTL asked for, as the backend rounded it up (etcd to whole seconds, say).
// It returns 0 for a Lease of another implementation.
func GrantedTTL(l Lease) time.Duration {
	if g, ok := l.(interface{ TTL() time.Duration }); ok {
		return g.TTL()
	}
	return 0
}

// TTL returns the effective TTL (GrantedTTL).
func (l *lease) TTL() time.Duration { return l.ttl }

func (l *lease) Key() string           { return l.key }
func (l *lease) Token() uint64         { return l.token }
func (l *lease) Done() <-chan struct{} { return l.done }

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// start arms the lease; the caller holds c.mu and knows the Locker is open.
func (l *lease) start(dl driver.Lock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pendingLoss != nil {
		return fmt.Errorf("%w: %w", ErrLeaseLost, l.pendingLoss)
	}
	l.dl, l.token = dl, dl.Token()
	l.ops = make(chan struct{}, 1)
	l.deadline = dl.Start().Add(l.ttl - driver.DriftMargin(l.ttl))
	if !time.Now().Before(l.deadline) {
		return fmt.Errorf("%w: %w (TTL %v too short for this backend's latency)", ErrLeaseLost, errLateGrant, l.ttl)
	}
	l.state = held
	l.granted = time.Now()
	l.c.tel.granted()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	if l.autoRefresh {
		l.c.wg.Add(1)
		l.refresher = time.AfterFunc(l.ttl/3, l.autoRefreshOnce)
	}
	return nil
}

// end moves a held lease to its final state; it reports whether it did. The
// caller holds l.mu and must call c.forget(l) after unlocking when it did.
// A lost lease keeps its timer: at the local deadline it has the backend
// expire the entry (expire), whatever ended it. cause (an index into causes)
// says why a lost lease was lost, for the metrics.
func (l *lease) end(state leaseState, err error, cause int) bool {
	if l.state != held {
		return false
	}
	l.state, l.err = state, err
	switch {
	case state == released:
		l.c.tel.ended(l.key, l.granted, 0, cause)
	case causes[cause] == causeClosed:
		l.c.tel.ended(l.key, l.granted, 2, cause)
	default:
		l.c.tel.ended(l.key, l.granted, 1, cause)
	}
	if state != lost {
		l.timer.Stop()
	}
	if l.refresher != nil && l.refresher.Stop() {
		l.c.wg.Done() // it will not run: no refresh follows the end
	}
	close(l.done)
	return true
}

// endWith ends the lease from outside l.mu.
func (l *lease) endWith(state leaseState, err error, cause int) bool {
	l.mu.Lock()
	ended := l.end(state, err, cause)
	l.mu.Unlock()
	if ended {
		l.c.forget(l)
		if state == lost {
			l.logLoss(cause, err)
		}
	}
	return ended
}

// logLoss logs the loss of the lease, outside l.mu: at warning level, but
// for a Locker closing with leases held (debug), which its owner asked for.
func (l *lease) logLoss(cause int, err error) {
	level := slog.LevelWarn
	if cause == iClosed {
		level = slog.LevelDebug
	}
	l.c.log.LogAttrs(context.Background(), level, "locker: lease lost", l.logAttrs(
		slog.String("cause", causes[cause]), slog.Any("err", err))...)
}

// logAttrs are the attributes of every log record about the lease.
func (l *lease) logAttrs(more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{slog.String("backend", l.c.name), slog.String("key", l.key),
		slog.Uint64("token", l.token)}, more...)
}

// errLateGrant says a lock was granted after its own deadline had passed.
var errLateGrant = errors.New("granted after its own deadline")

func lostBecause(cause error) error { return fmt.Errorf("%w: %w", ErrLeaseLost, cause) }

// lost is the driver.Request.Lost callback: the backend says the lock is gone.
func (l *lease) lost(cause error) {
	if cause == nil {
		cause = errors.New("reported lost by the backend")
	}
	l.mu.Lock()
	if l.state == pending {
		if l.pendingLoss == nil {
			l.pendingLoss = cause
		}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose(cause, iBackend)
}

// lose ends a held lease as lost and has its entry removed from the backend:
// the entry may outlive the loss (a session that came back, a shared lease
// the Locker keeps renewing), so it is released at once, conditionally on
// the owner, and — should that fail on an unreachable backend — expired when
// the local deadline passes (expire), so the lock is free for others within
// the TTL rather than when the holder calls Release or closes the Locker.
func (l *lease) lose(cause error, why int) {
	if l.endWith(lost, lostBecause(cause), why) {
		l.c.background(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
			defer cancel()
			l.cleanup(ctx)
		})
	}
}

// expire runs at the local deadline: it ends a lease that was not refreshed
// in time and, for a lease that ended lost (now or earlier), calls the
// driver's Expire once.
func (l *lease) expire() {
	l.mu.Lock()
	ended := false
	switch {
	case l.state == held:
		if d := time.Until(l.deadline); d > 0 { // a refresh moved the deadline
			l.timer.Reset(d)
			l.mu.Unlock()
			return
		}
		ended = l.end(lost, lostBecause(errors.New("deadline passed without a successful refresh")), iDeadline)
	case l.state != lost || l.expired:
		l.mu.Unlock()
		return
	}
	l.expired = true
	err := l.err
	l.mu.Unlock()
	if ended {
		l.c.forget(l)
		l.logLoss(iDeadline, err)
	}
	l.c.expireLater(l.dl)
}

// turn waits for this lease's turn to call into the driver; endTurn ends it.
func (l *lease) turn(ctx context.Context) error {
	select {
	case l.ops <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lease) endTurn() { <-l.ops }

func (l *lease) Refresh(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &opError{l.c.name, "refresh", l.key, err}
	}
	if err := l.turn(ctx); err != nil {
		return &opError{l.c.name, "refresh", l.key, err}
	}
	defer l.endTurn()
	if err := l.Err(); err != nil {
		return err
	}
	ctx, span := l.c.tel.start(ctx, "locker.Refresh", l.key)
	sent := time.Now()
	from, err := refreshDriverLock(ctx, l.dl, l.ttl, sent)
	l.c.tel.refreshed(ctx, l.key, sent, err)
	l.c.tel.end(span, err, l.token)
	if err != nil {
		// Failed or ambiguous: the holder can no longer be sure it holds.
		l.lose(wrapError(ctx, l.c.name, "refresh", l.key, err), iRefresh)
		return l.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held {
		return l.err
	}
	if d := from.Add(l.ttl - driver.DriftMargin(l.ttl)); d.After(l.deadline) {
		l.deadline = d
		l.timer.Reset(time.Until(d))
	}
	return nil
}

// refreshDriverLock refreshes dl, called at sent, and returns the moment
// its new validity of ttl counts from: sent, unless dl says otherwise
// (driver.ValidFromRefresher).
func refreshDriverLock(ctx context.Context, dl driver.Lock, ttl time.Duration, sent time.Time) (time.Time, error) {
	if r, ok := dl.(driver.ValidFromRefresher); ok {
		return r.RefreshValidFrom(ctx, ttl)
	}
	return sent, dl.Refresh(ctx, ttl)
}

func (l *lease) Release(ctx context.Context) error {
	if err := l.turn(ctx); err != nil {
		return &opError{l.c.name, "release", l.key, err}
	}
	defer l.endTurn()
	l.mu.Lock()
	switch l.state {
	case released:
		l.mu.Unlock()
		return nil
	case lost:
		// Clean up our own entry early if it is still there; the driver's
		// release is conditional on the owner, so a newer holder is safe.
		cleanup := !l.cleaned
		l.cleaned = true
		lerr := l.err
		l.mu.Unlock()
		if cleanup {
			_ = l.dl.Release(ctx)
		}
		return lerr
	}
	l.mu.Unlock()

	ctx, span := l.c.tel.start(ctx, "locker.Release", l.key)
	err := l.dl.Release(ctx)
	l.c.tel.end(span, err, l.token)
	switch {
	case err == nil:
		l.endWith(released, ErrReleased, 0)
		return nil
	case errors.Is(err, ErrLeaseLost):
		l.endWith(lost, lostBecause(wrapError(ctx, l.c.name, "release", l.key, err)), iRelease)
		return l.Err()
	default:
		// Unknown outcome: the lease stays as it was, so the caller may try
		// again; the deadline still ends it.
		return wrapError(ctx, l.c.name, "release", l.key, err)
	}
}

// closeLocker ends the lease because its Locker is closing; Close itself
// releases the entry, and the backend closes after it, so the timer that
// would call Expire is stopped.
func (l *lease) closeLocker() {
	l.endWith(lost, lostBecause(ErrClosed), iClosed)
	l.mu.Lock()
	l.timer.Stop()
	l.mu.Unlock()
}

// cleanup releases the lock on the backend, best effort and at most once,
// after the lease was lost (the Locker closed, the backend reported it).
// The driver's release is conditional on the owner: a newer holder is safe.
func (l *lease) cleanup(ctx context.Context) {
	if l.turn(ctx) != nil {
		return
	}
	defer l.endTurn()
	l.mu.Lock()
	cleanup := l.state == lost && !l.cleaned
	l.cleaned = true
	l.mu.Unlock()
	if !cleanup {
		return
	}
	if err := l.dl.Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		l.c.log.LogAttrs(ctx, slog.LevelInfo, "locker: could not remove a lost lease's entry; the backend expires it",
			l.logAttrs(slog.Any("err", err))...)
	}
}

// autoRefreshOnce runs on the refresher timer, a third of the TTL after the
// lease started or after its last automatic refresh: it refreshes once and
// re-arms the timer while the lease is held. Each refresh is bounded by the
// lease's deadline, so a hung one ends with the lease instead of silently
// outliving it. A refresh that fails ends the chain (the loss is logged where
// the lease ended), as does the end of the lease: end stops the armed timer,
// and a run already under way finds the lease ended, at its turn or after.
func (l *lease) autoRefreshOnce() {
	interval := l.ttl / 3
	// The refresh may take until the lease's deadline, not only the
	// interval: one that answers later than the interval but before the
	// deadline still proves the lock held, and a refresh cut off ends the
	// lease. The deadline's timer ends the lease if it comes first.
	ctx, cancel := context.WithDeadline(l.c.ctx, l.Deadline())
	err := l.Refresh(ctx)
	cancel()
	l.mu.Lock()
	if err == nil && l.state == held {
		l.refresher.Reset(interval)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.c.wg.Done()
}
