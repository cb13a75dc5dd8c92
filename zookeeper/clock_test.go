package zookeeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/holdtest"
	"github.com/distlock/locker/internal/testenv"
)

// TestClockJump_ServerWallClock_ChangesNothing: ZooKeeper times sessions on
// its monotonic clock, so a jump of its wall clock changes nothing. A holds,
// B waits; the server's clock jumps ten session timeouts ahead, then twenty
// back, each held for two timeouts: A's lease lives on (it refreshes
// itself) and B keeps waiting; once A releases, B is granted with a larger
// token. The sessions are of 6 s, not the package's usual 2 s: a quiet
// fresh-clone run of 2026-12-03, at a moment its server took 51 s to
// start, lost A's lease to a refresh later than 2 s — the load's doing,
// not the jump's.
func TestClockJump_ServerWallClock_ChangesNothing(t *testing.T) {
	const session = 6 * time.Second
	s, clock := testenv.ZooKeeperWithClock(t)
	servers, root := []string{s.Addr()}, freshRoot(t)
	raw := rawConn(t, servers, nil)
	open := func() locker.Locker {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := locker.Open(ctx, "zookeeper://"+s.Addr()+root+"?session_timeout="+session.String())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	holdtest.Check(t, holdtest.Scenario{
		A: open(), B: open(), Key: "k",
		Queued: func(t *testing.T) { waitQueue(t, raw, lockDir(root, "k"), 2) },
		Fault: func(t *testing.T) {
			for _, jump := range []time.Duration{10 * session, -20 * session} {
				clock.Jump(t, jump)
				time.Sleep(2 * session)
			}
		},
		Keeps: true,
	})
}
