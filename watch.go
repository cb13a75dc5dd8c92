package locker

import (
	"context"
	"errors"
	"iter"

	"github.com/distlock/locker/driver"
)

// errWatchBroke says the backend ended a watch on its own (a lost session,
// a compacted history, a closed connection).
var errWatchBroke = errors.New("the backend ended the watch")

// Watch follows the lock of key in l's key space: it yields the key's state
// at once, then again after each change — granted, released, expired,
// handed over, or its value published — through the backend's own
// notification, never by polling. Changes that come faster than the loop
// body takes them are coalesced: the next state yielded is the newest. The
// sequence ends when ctx ends (yielding ctx's error) or when the backend
// ends the watch (yielding ErrUnavailable: watch again to go on; a change
// in between shows in the first state yielded). A backend that cannot watch
// yields ErrUnsupported. Stop ranging to stop watching.
func Watch(ctx context.Context, l Locker, key string) iter.Seq2[LockInfo, error] {
	return func(yield func(LockInfo, error) bool) {
		c, in, err := inspector(l)
		if err != nil {
			yield(LockInfo{}, err)
			return
		}
		w, ok := c.b.(driver.Watcher)
		if !ok {
			yield(LockInfo{}, &opError{c.name, "watch", key, ErrUnsupported})
			return
		}
		if err := ValidateKey(key); err != nil {
			yield(LockInfo{}, &opError{c.name, "watch", key, err})
			return
		}
		// The backend's watch lives as long as this range loop, not as long
		// as the caller's context, and ends when the Locker closes.
		caller := ctx
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })()
		// fail ends the sequence with err, or with why the watch's context
		// ended: the caller's context or the Locker's Close.
		fail := func(err error) {
			if ctx.Err() != nil {
				if err = caller.Err(); err == nil {
					err = ErrClosed
				}
				yield(LockInfo{}, &opError{c.name, "watch", key, err})
				return
			}
			yield(LockInfo{}, wrapError(caller, c.name, "watch", key, err))
		}
		if c.ctx.Err() != nil {
			fail(ErrClosed)
			return
		}
		stored := storedKey(c.opts.namespace, key)
		changed, err := w.Watch(ctx, stored)
		if err != nil {
			fail(err)
			return
		}
		var last LockInfo
		for first := true; ; first = false {
			// Inspect after the watch is set up, so no change is missed.
			info, err := in.Inspect(ctx, stored)
			if err != nil {
				fail(err)
				return
			}
			now := fromDriver(info, key)
			if first || !sameState(now, last) {
				if !yield(now, nil) {
					return
				}
			}
			last = now
			select {
			case _, open := <-changed:
				if !open {
					fail(errWatchBroke)
					return
				}
			case <-ctx.Done():
				fail(ctx.Err())
				return
			}
		}
	}
}

// sameState reports whether two states of one key show the same holder,
// value and queue (the time left always differs).
func sameState(a, b LockInfo) bool {
	return a.Held == b.Held && a.Token == b.Token && a.Owner == b.Owner && a.Value == b.Value && a.Waiters == b.Waiters
}
