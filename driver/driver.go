// Package driver defines the interface a locker backend implements.
//
// Most users never import it: they use the portable types of package locker,
// built over a Backend with locker.New, or opened from a URL with locker.Open.
// Backend authors implement Backend and Lock here, and prove them with
// package conformance.
//
// The split follows database/sql and database/sql/driver. The portable layer
// (package locker) does, once for every backend: key and option validation,
// namespacing, the owner id, the local validity deadline on the monotonic
// clock, Done and Err, the automatic refresh loop, Do, closed-state checks and
// error wrapping. A backend does only what is particular to its engine: grant,
// wait for, refresh and release one lock, and hand out fencing tokens.
//
// # Errors
//
// A backend returns locker.ErrLocked when a lock is held by another owner and
// locker.ErrLeaseLost when a refresh or release finds the lock is no longer
// its own. Any other error is reported to users as locker.ErrUnavailable
// wrapping the backend's error, unless the call's context has ended, in which
// case the context's error is reported. A backend never retries a failed
// request on its own beyond what its engine protocol needs.
package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// OwnerID is the random 128-bit identity of one lease. Refresh and release are
// conditional on it, so that nobody can release a lock they do not hold.
type OwnerID [16]byte

// NewOwnerID returns a random OwnerID from crypto/rand.
func NewOwnerID() OwnerID {
	var id OwnerID
	// crypto/rand.Read never returns an error on supported platforms (Go 1.24+).
	_, _ = rand.Read(id[:])
	return id
}

// String returns the id as 32 lower-case hexadecimal digits.
func (id OwnerID) String() string { return hex.EncodeToString(id[:]) }

// DriftMargin returns how much earlier than Start+TTL the portable layer sets
// a lease's local deadline: 1% of the TTL plus 2 ms, for clock-rate
// differences between client and server and the scheduling delay of the
// timer itself (Redlock's rule). A backend that computes a validity of its
// own (Redlock) subtracts the same margin.
func DriftMargin(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// Request describes one acquisition. The portable layer fills it in and has
// already validated it: the key is valid, the TTL is positive and has been
// through TTLRounder if the backend implements it.
type Request struct {
	// Key is the name of the lock as the backend must store it. It is valid
	// UTF-8 of at most 2049 bytes. When the Locker has a namespace, Key is the
	// namespace, a NUL byte, and the user's key: NUL appears in no user key, so
	// namespaced and plain keys never collide. Backends encode Key as their
	// store requires; two distinct keys must never map to the same stored name.
	Key string

	// Owner identifies this acquisition; refresh and release compare it.
	Owner OwnerID

	// Label is a human-readable holder label for inspection (may be empty).
	Label string

	// Value is a value the holder publishes with the lock (an election's
	// proclaimed value), shown by inspection; non-empty only for a Backend
	// that implements Publisher.
	Value string

	// TTL is how long the lock lives on the server unless refreshed.
	TTL time.Duration

	// Limit is how many holders the key admits at once: 1 for a lock (the
	// portable layer never sends less), more for an N-permit lock, only to
	// a Backend that implements Permits. Each permit is a full lock of its
	// own (token, refresh, release); tokens stay unique and strictly
	// increasing per key across all its permits. A key in use with another
	// limit is refused with an error wrapping locker.ErrInvalidOption.
	Limit int

	// MinHold, when positive, is how long after the grant the lock stays
	// held on the server at least: a Release before then ends the holder's
	// lease but leaves the lock held until MinHold has passed since the
	// grant, without the client having to stay alive; a holder that crashes
	// leaves it held until the later of that and its TTL's end. Non-zero
	// only for a Backend that implements MinHolds.
	MinHold time.Duration

	// Lost, when the backend learns that a granted lock has ended on the
	// server (session expired, lease revoked, connection lost with the lock
	// bound to it), is called with the cause. It may be called from any
	// goroutine, more than once, and after Release; it never blocks.
	Lost func(cause error)
}

// Backend is one client of a lock service. Its methods are called
// concurrently from many goroutines.
type Backend interface {
	// Name is the short name used in error messages ("redis", "etcd").
	Name() string

	// TryAcquire makes one attempt to take req.Key. It returns
	// locker.ErrLocked when another owner holds the key. If the outcome of the
	// attempt is unknown (the context ended after the request was sent), the
	// backend removes any trace of req.Owner before returning.
	TryAcquire(ctx context.Context, req *Request) (Lock, error)

	// Acquire blocks until req.Key is taken for req.Owner, ctx ends, or the
	// backend fails. It waits with the engine's own notification, never by
	// polling at a fixed interval. A wait that ends without the lock leaves
	// nothing behind: no queue entry, no key, no goroutine.
	Acquire(ctx context.Context, req *Request) (Lock, error)

	// Close releases the backend's resources (connections it created,
	// subscriptions, goroutines). The portable layer calls it once, after
	// every lease of the Locker has ended.
	Close() error
}

// Lock is one granted lock.
type Lock interface {
	// Token is the fencing token of this acquisition: > 0, and strictly
	// larger than the token of every earlier acquisition of the same key.
	Token() uint64

	// Start is a moment, on the monotonic clock (time.Now), no later than
	// when the server began counting the lock's TTL — usually read just
	// before sending the request that obtained the lock. The lock is valid on
	// the server until at least Start + TTL; the portable layer derives the
	// local deadline from it and refuses a lock whose deadline has already
	// passed. A backend whose grant can come long after its request (a
	// server-side wait queue) re-anchors Start with a refresh sent after the
	// wait, rather than report a Start from before the wait.
	Start() time.Time

	// Refresh extends the lock to ttl from a moment no earlier than when
	// Refresh was called (see ValidFromRefresher for a lock that cannot).
	// It returns locker.ErrLeaseLost when the lock is no longer held by this
	// owner, and never extends another owner's lock.
	Refresh(ctx context.Context, ttl time.Duration) error

	// Release gives the lock up if, and only if, it is still held by this
	// owner. Releasing a lock that is gone or held by another owner returns
	// locker.ErrLeaseLost and changes nothing. Release may be called after the
	// lock was lost, to clean up early.
	Release(ctx context.Context) error
}

// ValidFromRefresher is an optional interface of a Lock whose refresh
// proves the lock valid from a moment before Refresh was called, not from
// the call: ZooKeeper's leader counts a session's timeout from the last
// touch a follower passed on to it, which may be older than the request
// that proved the session alive. RefreshValidFrom refreshes as Refresh does
// and returns that moment (zero when it extends nothing); the portable
// layer counts the TTL from it instead of from the call, and never moves a
// deadline back.
type ValidFromRefresher interface {
	RefreshValidFrom(ctx context.Context, ttl time.Duration) (time.Time, error)
}

// TTLRounder is an optional interface of a Backend whose engine cannot honour
// every TTL exactly (whole seconds, a server minimum). If a Backend does not
// implement it, every positive TTL is used as given.
type TTLRounder interface {
	// RoundTTL returns the TTL the backend will really use: ttl itself or a
	// longer one, never shorter; or an error wrapping
	// locker.ErrInvalidOption when ttl cannot be honoured.
	RoundTTL(ttl time.Duration) (time.Duration, error)
}

// Expirer is an optional interface of a Lock whose server-side life is not
// bounded by the TTL alone (a ZooKeeper node lives as long as its session, an
// etcd key as long as a shared lease). The portable layer calls Expire once
// when the local deadline passes without a successful refresh, or at once
// when a lock granted too late to become a lease cannot be given back; the
// backend then deletes its own entry, conditionally on its owner, so the
// lock is free for others within the TTL. If a Lock does not implement it, the server is
// trusted to expire the lock at Start + TTL.
type Expirer interface {
	Expire(ctx context.Context)
}

// Permits is an optional interface of a Backend that honours
// Request.Limit above 1 (N-permit locks, semaphores); its method is a
// marker. If a Backend does not implement it, the portable layer refuses a
// limit above 1 with locker.ErrUnsupported.
type Permits interface{ Permits() }

// LockInfo is what a backend knows of one lock, for inspection. It never
// carries the owner id: that is the capability to release the lock.
type LockInfo struct {
	// Key is the stored key (as in Request.Key).
	Key string
	// Held reports whether the lock is held now.
	Held bool
	// Label is the holder's label (Request.Label).
	Label string
	// Value is the holder's published value (Request.Value or the last
	// Publish).
	Value string
	// Token is the holder's fencing token.
	Token uint64
	// Granted is when the lock was granted, on the server's clock; zero
	// where the engine does not record it.
	Granted time.Time
	// TTL is the time left before the server frees the lock unless it is
	// refreshed; negative where the engine does not say.
	TTL time.Duration
	// Waiters counts acquisitions queued for the lock; negative where the
	// engine does not say.
	Waiters int
}

// Inspector is an optional interface of a Backend that can tell who holds
// what. If a Backend does not implement it, locker.Inspect and locker.List
// return locker.ErrUnsupported.
type Inspector interface {
	// Inspect describes the lock of a stored key; a free key is a LockInfo
	// with Held false (and Waiters as for a held one).
	Inspect(ctx context.Context, key string) (LockInfo, error)

	// List returns held locks whose stored keys start with prefix: at most
	// limit of them, from where cursor points ("" for the start), and the
	// cursor of the rest ("" when there is no more). The work of one call is
	// bounded by limit; the order of locks is the engine's.
	List(ctx context.Context, prefix, cursor string, limit int) (locks []LockInfo, next string, err error)
}

// MinHolds is an optional interface of a Backend that honours
// Request.MinHold; its method is a marker. If a Backend does not implement
// it, the portable layer refuses a minimum hold with locker.ErrUnsupported.
type MinHolds interface{ MinHolds() }

// Publisher is an optional interface of a Backend whose locks carry a value
// the holder can replace while it holds the lock (package election
// proclaims through it). If a Backend does not implement it, the portable
// layer refuses a non-empty value with locker.ErrUnsupported.
type Publisher interface {
	// Publish replaces the value of lock, a Lock this Backend granted, if
	// and only if it is still held by its owner; otherwise it returns
	// locker.ErrLeaseLost and changes nothing.
	Publish(ctx context.Context, lock Lock, value string) error
}

// Watcher is an optional interface of a Backend that follows one key's lock
// with the engine's own notification, never by polling at a fixed interval.
type Watcher interface {
	// Watch returns a channel that receives after every change of key's
	// lock from the moment Watch returns: granted, released, expired,
	// handed over, or its value published. Changes may be coalesced into
	// one signal (a send that does not block on a channel of one); none is
	// missed. A lock that ends by expiry is signalled within the backend's
	// expiry bound (a timer armed at the holder's server-side TTL is not
	// polling). The channel is closed when ctx ends, the Backend closes, or
	// the watch breaks; the caller then watches again and inspects. No
	// goroutine of the watch outlives ctx or the Backend.
	Watch(ctx context.Context, key string) (<-chan struct{}, error)
}
