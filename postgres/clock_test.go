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
// fires. A holder that refreshes resets the timer before it fires, so jumps
// of the server's clock — an hour ahead, then two back, each held past the
// timeout — change nothing for it: it keeps its lock, the waiter keeps
// waiting, and after the release the waiter is granted with a larger token.
// (A jump back does delay the timeout of a silent holder by the jump: its
// lock is held longer, never shorter.)
func TestClockJump_ServerWallClock_LiveHolderKeepsItsLock(t *testing.T) {
	s, clock := testenv.PostgresWithClock(t)
	const ttl = 3 * time.Second
	holdtest.Check(t, holdtest.Scenario{
		A: newLocker(t, s.DSN()), B: newLocker(t, s.DSN()), Key: "k",
		Options: []locker.Option{locker.WithTTL(ttl), locker.WithOwner("waiter")},
		Queued:  func(t *testing.T) { waitForLockWait(t, adminConn(t, s.DSN()), "waiter") },
		Fault: func(t *testing.T) {
			for _, jump := range []time.Duration{time.Hour, -2 * time.Hour} {
				clock.Jump(t, jump)
				time.Sleep(2 * ttl)
			}
		},
		Keeps: true,
	})
}
