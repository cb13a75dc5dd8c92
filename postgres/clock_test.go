package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// TestClockJump_Ahead_EndsASessionBeforeItsTimeout shows why a step of the
// server's clock ahead is outside the guarantee (doc.go). PostgreSQL (15
// here) leaves its interval timer armed for a timeout that a later
// statement superseded, and when it fires compares every timeout's
// end, computed on the wall clock when it was set, with the wall clock. A
// session idle in a transaction whose timeout a statement moved later (as
// Refresh moves it), on a server whose clock then steps ahead, is ended
// when the superseded timer fires: before its own timeout, so the lock it
// held is free before its holder's deadline. Without the step the same
// session lives.
//
// The step must land between the statement that moves the timeout and the
// superseded timer, a window of timeout/2; it goes through docker exec,
// which a loaded machine has taken longer than that (CI, 2026-12-03: the
// session lived). An attempt whose step or check missed its window shows
// nothing either way, so it is tried again, up to three times.
func TestClockJump_Ahead_EndsASessionBeforeItsTimeout(t *testing.T) {
	s, clock := testenv.PostgresWithClock(t)
	const timeout = 12 * time.Second
	for _, step := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("step %v", step), func(t *testing.T) {
			var err error
			for try := 1; ; try++ {
				var missed string
				if missed, err = sessionAfterStep(t, s.DSN(), clock, timeout, step); missed == "" {
					break
				}
				if try == 3 {
					t.Fatalf("%s in each of %d tries: the machine is too slow for this test's windows", missed, try)
				}
				t.Logf("try %d shows nothing: %s", try, missed)
			}
			var pgErr *pgconn.PgError
			switch {
			case step == 0 && err != nil:
				t.Fatalf("without a clock step, the session ended before its timeout: %v", err)
			case step != 0 && !(errors.As(err, &pgErr) && pgErr.Code == "25P03"):
				t.Fatalf("after a step of %v ahead, the session lived to its own timeout or ended otherwise: %v; "+
					"if PostgreSQL no longer ends it early, doc.go's caveat can go", step, err)
			case step != 0:
				t.Logf("ended before its own timeout: %v", err)
			}
		})
	}
}

// sessionAfterStep opens a session idle in a transaction, moves its
// timeout later, steps the server's clock by step, and runs a statement
// between the superseded timer and the session's own timeout: it returns
// what missed its window, or else that statement's error.
func sessionAfterStep(t *testing.T, dsn string, clock *testenv.Clock, timeout, step time.Duration) (missed string, err error) {
	t.Helper()
	conn := adminConn(t, dsn)
	ctx := ctxT(t, time.Minute)
	setTimeout := fmt.Sprintf("SELECT set_config('idle_in_transaction_session_timeout', '%d', true)", timeout.Milliseconds())
	start := time.Now()
	// The timer is armed for start+timeout.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, setTimeout); err != nil {
		t.Fatal(err)
	}
	// At timeout/2 the session's timeout moves to 1.5×timeout; the timer
	// stays where it was.
	time.Sleep(time.Until(start.Add(timeout / 2)))
	if _, err := conn.Exec(ctx, setTimeout); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	clock.Jump(t, step)
	defer clock.Jump(t, -step)
	if late := time.Since(start.Add(timeout)); late > -time.Second {
		return fmt.Sprintf("the step landed %v before the superseded timer, want 1s or more", -late.Round(time.Millisecond)), nil
	}
	// Between the superseded timer (start+timeout) and the session's own
	// timeout (start+1.5×timeout).
	time.Sleep(time.Until(start.Add(timeout * 5 / 4)))
	_, err = conn.Exec(ctx, "SELECT 1")
	if time.Now().After(deadline) {
		return fmt.Sprintf("the check came %v after the session's own timeout", time.Since(deadline).Round(time.Millisecond)), nil
	}
	return "", err
}
