package locker

import (
	"context"
	"errors"
	"fmt"
)

// The errors of the contract, matched with errors.Is. A lost lease's error
// matches ErrLeaseLost and its cause (ErrUnavailable, ErrClosed, a context
// error); context.Canceled and context.DeadlineExceeded are returned as such
// when the caller's context ended.
var (
	// ErrLocked: the key is held by another owner (TryAcquire), or another
	// owner's attempt held its place at that moment: an attempt that queues
	// before it looks (ZooKeeper) or takes grants before it counts them
	// (Redlock), and then gives up, can refuse another while no lease
	// holds the key.
	ErrLocked = errors.New("locker: locked by another owner")
	// ErrLeaseLost: the lease ended without Release — its deadline passed
	// without a refresh, the backend reported it gone, a refresh was ambiguous
	// or found another owner, or the Locker was closed. It wraps the cause.
	ErrLeaseLost = errors.New("locker: lease lost")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("locker: lease released")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("locker: closed")
	// ErrInvalidKey: the key is empty, longer than MaxKeyLen bytes, not valid
	// UTF-8, or contains a NUL byte.
	ErrInvalidKey = errors.New("locker: invalid key")
	// ErrInvalidOption: an option's value cannot be honoured (a TTL that is not
	// positive or that the backend cannot represent, a bad namespace, …).
	ErrInvalidOption = errors.New("locker: invalid option")
	// ErrInvalidURL: a URL given to Open is malformed; the message names the
	// part that is wrong.
	ErrInvalidURL = errors.New("locker: invalid URL")
	// ErrUnavailable: the backend could not be reached or answered with an
	// error. It is never used for a lock held by someone else.
	ErrUnavailable = errors.New("locker: backend unavailable")
	// ErrUnauthorized: the backend refused the credentials, or refused the
	// operation to them (a missing permission, an ACL, a role without the
	// grant). It is never used for an outage nor for a lock held by someone
	// else: retrying will not help until the credentials or the server's
	// permissions change. The engine's own message is kept in the error.
	ErrUnauthorized = errors.New("locker: unauthorized")
	// ErrUnsupported: the backend lacks an optional ability (inspection,
	// say).
	ErrUnsupported = errors.New("locker: not supported by this backend")
)

// contractErrors are the sentinels a backend may return as they are.
var contractErrors = []error{
	ErrLocked, ErrLeaseLost, ErrReleased, ErrClosed,
	ErrInvalidKey, ErrInvalidOption, ErrInvalidURL, ErrUnavailable, ErrUnsupported,
	ErrUnauthorized,
}

// opError is the one place backend errors are turned into contract errors.
// It names the backend, the operation and the key, and keeps the cause
// reachable with errors.As.
type opError struct {
	backend string
	op      string
	key     string
	err     error
}

func (e *opError) Error() string {
	if e.key == "" {
		return fmt.Sprintf("%s: %s: %v", e.backend, e.op, e.err)
	}
	return fmt.Sprintf("%s: %s %q: %v", e.backend, e.op, e.key, e.err)
}

func (e *opError) Unwrap() error { return e.err }

// wrapError classifies err, returned by a backend for op on key while ctx was
// in force: context errors stay context errors (joined with what the backend
// said), contract sentinels pass through, everything else becomes
// ErrUnavailable.
func wrapError(ctx context.Context, backend, op, key string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case isContract(err):
	case ctx != nil && ctx.Err() != nil:
		// The caller's context ended: report that. If the backend failed in
		// its own way meanwhile, it may also have been unreachable: say both.
		if !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w: %w)", ctx.Err(), ErrUnavailable, err)
		}
	default:
		// Includes a backend's own internal timeouts: the caller's context is
		// still live, so to the caller the backend was unavailable.
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &opError{backend: backend, op: op, key: key, err: err}
}

func isContract(err error) bool {
	for _, s := range contractErrors {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
