package postgres_test

import (
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/holdtest"
	"github.com/distlock/locker/internal/testenv"
)

// TestClockJump_ServerWallClock_LiveHolderKeepsItsLock: PostgreSQL times
// idle_in_transaction_session_timeout, which ends a silent holder's
// session, with an interval timer, checked against its wall clock when it
// fires. A step of the server's clock back, held past the timeout, changes
// nothing for a holder that refreshes: it keeps its lock, the waiter keeps
// waiting, and after the release the waiter is granted with a larger token.
// (A jump back delays the timeout of a silent holder by the jump: its lock
// is held longer, never shorter.) A step ahead is outside the guarantee: a
// loaded CI run (2026-12-01) saw this test, with a step of an hour ahead,
// grant B while A's lease was live — the server ended A's session by its
// timeout — as the reliability histories had (docs/reliability.md).
func TestClockJump_ServerWallClock_LiveHolderKeepsItsLock(t *testing.T) {
	s, clock := testenv.PostgresWithClock(t)
	const ttl = 3 * time.Second
	holdtest.Check(t, holdtest.Scenario{
		A: newLocker(t, s.DSN()), B: newLocker(t, s.DSN()), Key: "k",
		Options: []locker.Option{locker.WithTTL(ttl), locker.WithOwner("waiter")},
		Queued:  func(t *testing.T) { waitForLockWait(t, adminConn(t, s.DSN()), "waiter") },
		Fault: func(t *testing.T) {
			clock.Jump(t, -2*time.Hour)
			time.Sleep(2 * ttl)
		},
		Keeps: true,
	})
}
