package zookeeper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/testenv"
	"go.uber.org/goleak"
)

// harness gives the suite Lockers of one ZooKeeper service (a server or an
// ensemble), each with its own connection and session.
type harness struct {
	servers []string
	root    string
	ttl     time.Duration

	mu      sync.Mutex
	dialers map[locker.Locker]*killDialer
}

func newHarness(t *testing.T, ttl time.Duration, servers []string) *harness {
	return &harness{servers: servers, ttl: ttl, root: freshRoot(t), dialers: map[locker.Locker]*killDialer{}}
}

func (h *harness) NewLocker(ctx context.Context, _ *testing.T, opts ...locker.Option) (locker.Locker, error) {
	return h.open(h.ttl, opts...)
}

// NewLongLocker implements conformance.LongHolder: a Locker's TTL is its
// session timeout, so a longer TTL takes a session of its own.
func (h *harness) NewLongLocker(ctx context.Context, _ *testing.T, ttl time.Duration) (locker.Locker, error) {
	return h.open(ttl)
}

// open makes a Locker with a session of its own, through a killDialer.
func (h *harness) open(session time.Duration, opts ...locker.Option) (locker.Locker, error) {
	d := &killDialer{}
	l, _, err := dialWith(h.servers, h.root, session, d.dial, opts...)
	return h.track(l, d, err)
}

// track records d as the dialer of l, which Crash kills, unless err (the
// error of making l) is not nil.
func (h *harness) track(l locker.Locker, d *killDialer, err error) (locker.Locker, error) {
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.dialers[l] = d
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return h.ttl }
func (h *harness) FIFO() bool         { return true }

// Crash cuts the client off from the servers for good: its session, and the
// locks of it, live on the server until the session timeout.
func (h *harness) Crash(_ *testing.T, l locker.Locker) {
	h.mu.Lock()
	d := h.dialers[l]
	h.mu.Unlock()
	d.kill()
}

// IgnoreLeaks implements conformance.LeakIgnorer. A URL whose servers
// never answer ends, when the context does, in go-zookeeper's Close, which
// waits up to a second for the server to confirm and then gives up by its
// own timer: dial leaves that wait in the background rather than hold a
// caller whose context has ended (zookeeper.go). The wait is bounded, so it
// is not a leak; usually the close request is answered at once, but when
// the connection's loop flushes its queue before the request is queued (a
// race inside go-zookeeper, seen on a loaded CI machine), the wait runs its
// full second and outlives the subtest.
func (h *harness) IgnoreLeaks() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).Close")}
}

func (h *harness) NewUnreachableLocker(ctx context.Context, _ *testing.T) (locker.Locker, error) {
	return locker.Open(ctx, zkURL([]string{"127.0.0.1:1"}, "/locker"))
}

// TestConformance runs the suite on one server with every Locker
// authenticated as one identity (digest), as in production: every node the
// suite makes carries that identity's ACL alone. The ensemble's run below
// covers unauthenticated Lockers.
func TestConformance(t *testing.T) {
	// Writes wait for a disk flush (several milliseconds in the test
	// container, far more on a loaded machine), and reads queue behind
	// them: a refresh (a sync and a read) of one of the thousand locks the
	// suite holds at once must fit in a third of the TTL.
	h := &digestHarness{harness: newHarness(t, 5*time.Second, []string{testenv.ZooKeeper(t).Addr()})}
	h.root = topRoot(t)
	conformance.Run(t, h)
}

func TestConformance_Ensemble(t *testing.T) {
	// Every write of an ensemble waits for a quorum to flush it, on this one
	// machine: longer still.
	conformance.Run(t, newHarness(t, 5*time.Second, testenv.ZooKeeperEnsemble(t).Addrs()))
}
