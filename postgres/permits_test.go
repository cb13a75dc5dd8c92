package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// advisoryLocks counts the advisory locks of the database's sessions other
// than admin's: a permit acquisition holds some while it waits (its place in
// the queue, the watch lock), none after it ends.
func advisoryLocks(t *testing.T, admin *pgx.Conn) int {
	t.Helper()
	var n int
	err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "+
		"AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPermits_InspectShowsTheEarliestHolderAndTheQueue: an N-permit key is
// held while any permit is; Inspect shows the holder of the lowest token
// and counts the Acquires queued; List shows the key once, and never a
// permit's own row.
func TestPermits_InspectShowsTheEarliestHolderAndTheQueue(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a := newLocker(t, dsn, locker.WithOwner("first"))
	b := newLocker(t, dsn, locker.WithOwner("second"))
	c := newLocker(t, dsn, locker.WithOwner("waiter"))
	k := randomKey("permits-inspect")
	first, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, k, locker.WithLimit(2))
		waited <- err
	}()
	var info locker.LockInfo
	for give := time.Now().Add(30 * time.Second); time.Now().Before(give); time.Sleep(20 * time.Millisecond) {
		if info, err = locker.Inspect(ctxT(t, 10*time.Second), a, k); err != nil {
			t.Fatal(err)
		}
		if info.Waiters > 0 {
			break
		}
	}
	if !info.Held || info.Token != first.Token() || info.Owner != "first" || info.Waiters != 1 || info.TTL <= 0 {
		t.Fatalf("Inspect of a 2-permit key, both held, one waiter = %+v, want held by token %d (the earliest), owner \"first\", 1 waiter, time left", info, first.Token())
	}
	var listed []locker.LockInfo
	for info, err := range locker.List(ctxT(t, 10*time.Second), a, "") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, info)
	}
	if len(listed) != 1 || listed[0].Key != k || listed[0].Token != first.Token() {
		t.Fatalf("List with one 2-permit key held = %+v, want that key once, token %d", listed, first.Token())
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v", err)
	}
	if err := first.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if info, err = locker.Inspect(ctxT(t, 10*time.Second), a, k); err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Token != second.Token() || info.Owner != "second" || info.Waiters != 0 {
		t.Fatalf("Inspect after the first permit's release = %+v, want held by token %d, no waiter", info, second.Token())
	}
	if err := second.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if info, err = locker.Inspect(ctxT(t, 10*time.Second), a, k); err != nil || info.Held {
		t.Fatalf("Inspect with every permit free = %+v, %v, want free", info, err)
	}
}

// TestPermits_EndedWaitsLeaveNoSessionState: a permit wait takes advisory
// locks and LISTENs on a pool connection; a wait that is granted and
// released, and one that is cancelled, leave neither behind.
func TestPermits_EndedWaitsLeaveNoSessionState(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a, b := newLocker(t, dsn), newLocker(t, dsn)
	k := randomKey("permits-clean")
	held, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	granted, err := b.Acquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := granted.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := advisoryLocks(t, adminConn(t, dsn)); n != 0 {
		t.Fatalf("%d advisory locks after a permit's Acquire and Release, want none", n)
	}
	other, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, k, locker.WithLimit(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with every permit held = %v, want DeadlineExceeded", err)
	}
	if n := advisoryLocks(t, adminConn(t, dsn)); n != 0 {
		t.Fatalf("%d advisory locks after a cancelled permit wait, want none", n)
	}
	// The connection the wait used went back to the pool clean: it does
	// not LISTEN (a notification would reach no one) — seen from the
	// server, no session but the holders' and ours is listening.
	admin := adminConn(t, dsn)
	var listening int
	err = admin.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "+
		"AND datname = current_database() AND state = 'idle' AND query LIKE 'LISTEN%'").Scan(&listening)
	if err != nil {
		t.Fatal(err)
	}
	if listening != 0 {
		t.Fatalf("%d idle sessions whose last statement was a LISTEN, want none", listening)
	}
	for _, l := range []locker.Lease{held, other} {
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPermits_CancelledWaitLeavesTheQueueWhenItReturns: an Acquire
// cancelled at any point of its wait has left the key's queue when it
// returns — Inspect counts it no more and the next waiter is first — not
// once the server notices a dropped connection.
func TestPermits_CancelledWaitLeavesTheQueueWhenItReturns(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a, b := newLocker(t, dsn), newLocker(t, dsn)
	k := randomKey("permits-cancel")
	held, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	// The wait's first steps (the queue, the first look, its rollback, the
	// description of the holders) take a few milliseconds: cancels spread
	// over the first 30 land in each of them.
	for i := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(time.Duration(i%30)*time.Millisecond, cancel)
		_, err := b.Acquire(ctx, k, locker.WithLimit(2))
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire cancelled after %d ms with every permit held = %v, want Canceled", i%30, err)
		}
		info, err := locker.Inspect(ctxT(t, 10*time.Second), a, k)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters != 0 {
			t.Fatalf("Inspect after an Acquire cancelled after %d ms returned = %+v, want no waiter", i%30, info)
		}
	}
	for _, l := range []locker.Lease{held, other} {
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMinHold_InspectShowsAReleasedHoldUntilItEnds: a lock released inside
// its minimum hold is shown held by its holder (token, owner, last published
// value) with the time left of the hold, and free once it has passed.
func TestMinHold_InspectShowsAReleasedHoldUntilItEnds(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a := newLocker(t, dsn, locker.WithOwner("cron"))
	k := randomKey("minhold-inspect")
	const hold = 2 * time.Second
	lease, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithMinHold(hold), locker.WithValue("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.Publish(ctxT(t, 10*time.Second), lease, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	info, err := locker.Inspect(ctxT(t, 10*time.Second), a, k)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Token != lease.Token() || info.Owner != "cron" || info.Value != "v2" || info.TTL <= 0 || info.TTL > hold {
		t.Fatalf("Inspect of a lock released inside its minimum hold %v = %+v, want held by token %d, owner \"cron\", value \"v2\" (published), time left in (0, %v]", hold, info, lease.Token(), hold)
	}
	for give := time.Now().Add(hold + 30*time.Second); info.Held && time.Now().Before(give); time.Sleep(50 * time.Millisecond) {
		if info, err = locker.Inspect(ctxT(t, 10*time.Second), a, k); err != nil {
			t.Fatal(err)
		}
	}
	if info.Held {
		t.Fatalf("Inspect long after the minimum hold = %+v, want free", info)
	}
}
