// Package conformance is the suite every locker backend must pass: the
// promises of package locker, checked against a real lock service.
//
// A backend's conformance test is a harness and one line:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, harness{…}) }
//
// The suite depends on nothing but package locker (and goleak, to prove no
// goroutine outlives a lease or a Locker), so anyone writing a backend can
// import it. It is proven to have teeth: its own tests run it against
// deliberately broken backends and check that the right subtests fail.
package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"go.uber.org/goleak"
)

// Harness gives the suite clients of the one lock service under test.
type Harness interface {
	// NewLocker returns a new, independent client (its own connections) of
	// the lock service, with opts as Locker-wide options. The suite closes it.
	NewLocker(ctx context.Context, t *testing.T, opts ...locker.Option) (locker.Locker, error)
	// TTL is the TTL the suite uses for expiry tests: short, but honoured by
	// the backend (not rounded up) and long enough for several round trips.
	TTL() time.Duration
}

// Crasher is an optional Harness capability.
type Crasher interface {
	// Crash makes l's client die without releasing: afterwards l's backend can
	// no longer reach the service, and the locks it held stay on the server
	// until their TTL (or session timeout) ends. The suite still closes l.
	Crash(t *testing.T, l locker.Locker)
}

// Unreachabler is an optional Harness capability.
type Unreachabler interface {
	// NewUnreachableLocker returns a Locker for a service that cannot be
	// reached (a closed port, say), or the error from constructing it.
	NewUnreachableLocker(ctx context.Context, t *testing.T) (locker.Locker, error)
}

// FIFOHarness is an optional Harness capability: FIFO reports whether
// waiters are served in arrival order.
type FIFOHarness interface{ FIFO() bool }

// Queuer is an optional capability of a FIFO harness: Queued returns how
// many Acquires wait for a lock on the service now. Where the backend's
// Inspect does not count a key's waiters, the FIFO tests then start each
// waiter once the one before it is seen queued, instead of after a fixed
// gap, which a loaded machine can outrun.
type Queuer interface {
	Queued(ctx context.Context, t *testing.T) (int, error)
}

// Slacker is an optional Harness capability: how long past the TTL a crashed
// holder's lock may stay held (default: half the TTL plus one second).
type Slacker interface{ ExpirySlack() time.Duration }

// LeakIgnorer is an optional Harness capability: goroutines of long-lived
// infrastructure the harness shares across tests (not of any Locker) that
// the leak check must ignore.
type LeakIgnorer interface{ IgnoreLeaks() []goleak.Option }
