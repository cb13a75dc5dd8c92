package postgres_test

import (
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// TestClockJump_ServerWallClock_LiveHolderKeepsItsLock: PostgreSQL times
// idle_in_transaction_session_timeout, which ends a silent holder's
// session, with an interval timer, checked against its wall clock when it
// fires. A holder that refreshes resets the timer before it fires, so jumps
// of the server's clock — an hour ahead, then two back — change nothing for
// it: its refreshes succeed, the waiter keeps waiting, and after the
// release the waiter is granted with a larger token. (A jump back does
// delay the timeout of a silent holder by the jump: its lock is held
// longer, never shorter.)
func TestClockJump_ServerWallClock_LiveHolderKeepsItsLock(t *testing.T) {
	s, clock := testenv.PostgresWithClock(t)
	a, b := newLocker(t, s.DSN()), newLocker(t, s.DSN())
	ctx := ctxT(t, 2*time.Minute)
	const ttl = 3 * time.Second
	held, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var token uint64
	go func() {
		l, err := b.Acquire(ctx, "k", locker.WithTTL(ttl), locker.WithOwner("waiter"))
		if err == nil {
			token = l.Token()
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitForLockWait(t, adminConn(t, s.DSN()), "waiter")

	for _, jump := range []time.Duration{time.Hour, -2 * time.Hour} {
		clock.Jump(t, jump)
		time.Sleep(2 * ttl) // past the idle timeout, had it been shortened
		if err := held.Err(); err != nil {
			t.Fatalf("A's lease after the server's clock jumped %v: %v", jump, err)
		}
		select {
		case err := <-got:
			t.Fatalf("B's Acquire returned (%v) while A held the lock, after a jump of %v", err, jump)
		default:
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("B's Acquire once A released: %v", err)
	}
	if token <= held.Token() {
		t.Errorf("B's token %d after A's %d, want larger", token, held.Token())
	}
}
