package locker

import (
	"context"
	"errors"
)

// Do acquires key (waiting for it), runs fn while holding it, and releases it.
// The lease refreshes itself in the background while fn runs (unless
// WithAutoRefresh(false) is given), and fn's context is cancelled the moment
// the lease is lost, with the loss as its cause (context.Cause). Do returns
// fn's error, joined with ErrLeaseLost if the lease was lost while fn ran, or
// with the release's error. If fn panics, the lease is released before the
// panic goes on up the stack.
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context, lease Lease) error, opts ...Option) (err error) {
	lease, err := l.Acquire(ctx, key, append([]Option{WithAutoRefresh(true)}, opts...)...)
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Done():
			cancel(lease.Err())
		case <-fnCtx.Done():
		}
	}()
	// Deferred, so that a panic in fn that a caller recovers leaves neither
	// the lock held nor the watcher running.
	defer func() {
		cancel(nil)
		<-watched
		err = errors.Join(err, finish(ctx, lease))
	}()
	return fn(fnCtx, lease)
}

// finish releases a lease Do held; even when ctx has ended, there is no point
// past the lease's deadline.
func finish(ctx context.Context, lease Lease) error {
	rctx, rcancel := context.WithDeadline(context.WithoutCancel(ctx), lease.Deadline())
	defer rcancel()
	if lerr := lease.Err(); errors.Is(lerr, ErrLeaseLost) {
		_ = lease.Release(rctx) // clean up our own entry early, if it is still there
		return lerr
	}
	return lease.Release(rctx)
}
