package locker

import (
	"context"
	"time"
)

// Locker hands out leases on named locks. A Locker is safe for concurrent use;
// each Lease it returns belongs to one holder.
type Locker interface {
	// Acquire blocks until key is held, ctx ends, or the backend fails. A wait
	// that ends without the lock leaves nothing behind on the backend. A
	// grant that arrives after its own deadline (the backend slower than the
	// TTL) is given back and the wait starts over, up to three grants; then
	// Acquire fails with ErrLeaseLost: the TTL is too short for the backend.
	Acquire(ctx context.Context, key string, opts ...Option) (Lease, error)
	// TryAcquire makes one attempt; ErrLocked when another owner holds key
	// (or was taking it at that moment: see ErrLocked).
	TryAcquire(ctx context.Context, key string, opts ...Option) (Lease, error)
	// Close ends every lease of this Locker (releasing them on the backend
	// where it can), then closes the backend. Later calls return ErrClosed.
	Close() error
}

// Lease is one holder's hold on one key. It is valid until Deadline, unless
// refreshed, and ends early when the backend reports it lost. All methods are
// safe for concurrent use.
type Lease interface {
	// Key is the key as given to Acquire (without the namespace).
	Key() string
	// Token is the fencing token: > 0 and strictly larger than the token of
	// every earlier acquisition of the same key. Pass it to the resource the
	// lock protects, which refuses tokens lower than one it has seen (package
	// fencing).
	Token() uint64
	// Deadline is a conservative local end of validity: when the request that
	// obtained or last refreshed the lock was sent, on the monotonic clock,
	// plus the TTL, minus a clock-drift margin.
	Deadline() time.Time
	// Done is closed when the lease ends for any reason.
	Done() <-chan struct{}
	// Err is nil while the lease is held; then ErrReleased or ErrLeaseLost
	// (wrapping the cause).
	Err() error
	// Refresh extends the lease by its TTL. A failed or ambiguous refresh ends
	// the lease: after it, Err returns ErrLeaseLost. Refresh after the lease
	// ended returns ErrLeaseLost (or ErrReleased) and changes nothing.
	Refresh(ctx context.Context) error
	// Release gives the lock up. Releasing twice is a no-op; releasing a lease
	// that was lost returns ErrLeaseLost and never touches a newer holder's
	// lock.
	Release(ctx context.Context) error
}
