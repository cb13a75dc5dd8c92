package locker

import (
	"context"
	"errors"
)

// Do acquires key (waiting for it), runs fn while holding it, and releases it.
// The lease refreshes itself in the background while fn runs (automatic
// refresh is on unless an option turns it off), and fn's context is cancelled
// the moment the lease is lost, with the loss as its cause
// (context.Cause). Do returns fn's error, joined with ErrLeaseLost if the
// lease was lost while fn ran, or with the release's error.
func Do(ctx context.Context, l Locker, key string, fn func(ctx context.Context, lease Lease) error, opts ...Option) error {
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
	fnErr := fn(fnCtx, lease)
	cancel(nil)
	<-watched
	// Release even when ctx has ended; there is no point past the deadline.
	rctx, rcancel := context.WithDeadline(context.WithoutCancel(ctx), lease.Deadline())
	defer rcancel()
	if lerr := lease.Err(); errors.Is(lerr, ErrLeaseLost) {
		_ = lease.Release(rctx) // clean up our own entry early, if it is still there
		return errors.Join(fnErr, lerr)
	}
	return errors.Join(fnErr, lease.Release(rctx))
}
