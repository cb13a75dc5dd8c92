package zookeeper_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/holdtest"
	"github.com/distlock/locker/internal/testenv"
)

// TestClockJump_ServerWallClock_ChangesNothing: ZooKeeper times sessions on
// its monotonic clock, so a jump of its wall clock changes nothing. A holds,
// B waits; the server's clock jumps ten session timeouts ahead, then twenty
// back, each held for two timeouts: A's lease lives on (it refreshes
// itself) and B keeps waiting; once A releases, B is granted with a larger
// token.
func TestClockJump_ServerWallClock_ChangesNothing(t *testing.T) {
	s, clock := testenv.ZooKeeperWithClock(t)
	servers, root := []string{s.Addr()}, freshRoot(t)
	raw := rawConn(t, servers, nil)
	holdtest.Check(t, holdtest.Scenario{
		A: dial(t, servers, root), B: dial(t, servers, root), Key: "k",
		Queued: func(t *testing.T) { waitQueue(t, raw, lockDir(root, "k"), 2) },
		Fault: func(t *testing.T) {
			for _, jump := range []time.Duration{10 * testTTL, -20 * testTTL} {
				clock.Jump(t, jump)
				time.Sleep(2 * testTTL)
			}
		},
		Keeps: true,
	})
}
