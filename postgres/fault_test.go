package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/bounds"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// TestPostgres_TerminatedBackend_DoneFiresOtherAcquiresStaleWriteRefused:
// pg_terminate_backend on the holder's session ends its lease at once (no
// refresh needed: the lock's connection is watched), another client takes
// the lock without waiting and with a larger token, and the SQL guard
// refuses the old holder's write.
func TestPostgres_TerminatedBackend_DoneFiresOtherAcquiresStaleWriteRefused(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	admin := adminConn(t, dsn)
	a, b := newLocker(t, dsn), newLocker(t, dsn)
	guard, err := postgres.NewGuard(newPool(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dsn)
	if _, err := pool.Exec(ctxT(t, 10*time.Second), "CREATE TABLE ledger (writer text, token bigint)"); err != nil {
		t.Fatal(err)
	}
	write := func(who string, token uint64) error {
		return pgx.BeginFunc(ctxT(t, 10*time.Second), pool, func(tx pgx.Tx) error {
			if err := guard.AdmitTx(ctxT(t, 10*time.Second), tx, "ledger", token); err != nil {
				return err
			}
			_, err := tx.Exec(ctxT(t, 10*time.Second), "INSERT INTO ledger VALUES ($1, $2)", who, int64(token))
			return err
		})
	}

	k := randomKey("terminate")
	old, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute), locker.WithOwner("old-holder"))
	if err != nil {
		t.Fatal(err)
	}
	if err := write("old", old.Token()); err != nil {
		t.Fatalf("first write: %v", err)
	}

	pid := holderPID(t, admin, "old-holder")
	var ok bool
	if err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the holder's backend was terminated (TTL is a minute)")
	}
	if err := old.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", err)
	}

	next, err := b.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire after the holder was terminated: %v", err)
	}
	if next.Token() <= old.Token() {
		t.Fatalf("token %d after termination, want > %d", next.Token(), old.Token())
	}
	if err := write("new", next.Token()); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	if err := write("old", old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("old holder's late write = %v, want ErrStaleToken", err)
	}
	var rows []string
	r, _ := pool.Query(ctxT(t, 10*time.Second), "SELECT writer FROM ledger ORDER BY token, writer")
	rows, err = pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rows) != "[old new]" {
		t.Fatalf("ledger = %v, want [old new]: the refused write must not commit", rows)
	}
	if err := old.Release(ctxT(t, 10*time.Second)); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("old Release = %v, want ErrLeaseLost", err)
	}
	if err := next.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestPostgres_SilentHolder_CutOffByServerAfterTTL: a client that stops
// talking (its sockets stay open, nothing flows) keeps the lock on the
// server, which ends the session by idle_in_transaction_session_timeout
// after the TTL: the lock is free with nobody releasing it.
func TestPostgres_SilentHolder_CutOffByServerAfterTTL(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	h := newHarness(t, dsn)
	silent, err := h.NewLocker(ctxT(t, 10*time.Second), t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	other := newLocker(t, dsn)
	admin := adminConn(t, dsn)

	k := randomKey("silent")
	start := time.Now()
	held, err := silent.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(silentTTL), locker.WithOwner("silent"))
	if err != nil {
		t.Fatal(err)
	}
	pid := holderPID(t, admin, "silent")
	h.Crash(t, silent)

	next := heldUntilCutOff(t, other, k, start, silentTTL, held)
	var alive bool
	if err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
		t.Fatal(err)
	}
	if alive {
		t.Fatalf("the silent holder's backend %d is still there after the lock moved on", pid)
	}
	if err := next.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestPostgres_PartitionedClient_LosesLeaseByLocalDeadline: toxiproxy cuts
// the holder off (connections stay open, nothing gets through). With
// automatic refresh on, its refreshes go unanswered: Done fires no later
// than the local deadline, and a client on the other side of the partition
// takes the lock once the server's idle timer ends the old session.
func TestPostgres_PartitionedClient_LosesLeaseByLocalDeadline(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	proxy := testenv.Postgres(t).Proxy(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	far := newLocker(t, u.String())
	near := newLocker(t, dsn)

	const ttl = time.Second
	k := randomKey("partition")
	held, err := far.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(ttl), locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(t)
	deadline := held.Deadline()
	select {
	case <-held.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("Done not closed after the partition")
	}
	// Done closes by the local deadline's timer: nothing from the server
	// crosses the blackhole. The slack is for a loaded machine's
	// scheduling.
	late := time.Since(deadline)
	bounds.Took(t, "Done after the local deadline", late, 2*time.Second)
	if late > 2*time.Second {
		t.Fatalf("Done closed %v after the local deadline %v", late, deadline)
	}
	if err := held.Err(); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", err)
	}
	takeOver(t, near, k, ttl+5*time.Second, held, "across the partition")
	proxy.Heal(t)
	if err := far.Close(); err != nil {
		t.Fatalf("Close after the partition healed: %v", err)
	}
}

// TestPostgres_KilledAndRestarted_TokensAfterExceedTokensBefore: PostgreSQL
// is SIGKILLed while lock transactions are open (their sequence advances
// never committed, so they may be lost with the unflushed WAL); after the
// restart every token handed out is larger than every token handed out
// before, for the same keys and for new ones.
func TestPostgres_KilledAndRestarted_TokensAfterExceedTokensBefore(t *testing.T) {
	killAndRestart(t, false)
}

// killAndRestart holds and releases locks, kills the server and restarts
// it, and checks that the held leases end (with refresh, a refresh meets
// the dead session first; without, they end by themselves) and that every
// token after exceeds every token before. opts choose the mode.
func killAndRestart(t *testing.T, refresh bool, opts ...locker.Option) {
	srv := testenv.Postgres(t)
	dsn := testenv.PostgresDB(t)
	before := newLocker(t, dsn, opts...)

	var keys []string
	var maxBefore uint64
	var held []locker.Lease
	for i := range 40 {
		k := randomKey(fmt.Sprintf("kill-%d", i))
		keys = append(keys, k)
		lease, err := before.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		maxBefore = max(maxBefore, lease.Token())
		if i%2 == 0 {
			// Half are released again (rolled back: nothing committed
			// either), half stay held in open transactions at the kill.
			if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		} else {
			held = append(held, lease)
		}
	}

	srv.Kill(t)
	srv.Restart(t)

	for _, lease := range held {
		if refresh {
			_ = lease.Refresh(ctxT(t, 30*time.Second))
		}
		select {
		case <-lease.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("lease %q survived the server's death", lease.Key())
		}
	}
	admin := adminConn(t, dsn)
	var seqAfter int64
	if err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT last_value FROM locker_locks_token").Scan(&seqAfter); err != nil {
		t.Fatal(err)
	}
	t.Logf("largest token before the kill %d; sequence after the restart, before any lock: %d (%s)",
		maxBefore, seqAfter, map[bool]string{true: "went back: the floor is what saves the day", false: "kept"}[uint64(seqAfter) < maxBefore])

	after := newLocker(t, dsn, opts...)
	for i, k := range append(keys, randomKey("kill-new"), randomKey("kill-new")) {
		lease, err := after.Acquire(ctxT(t, 30*time.Second), k, locker.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("Acquire %d after the restart: %v", i, err)
		}
		if lease.Token() <= maxBefore {
			t.Fatalf("token %d for %q after the restart, want > %d (the largest before)", lease.Token(), k, maxBefore)
		}
		if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgres_CancelledAcquire_LeavesNoWaiterInLockQueue: a waiting
// Acquire whose context ends is taken out of PostgreSQL's lock queue by a
// cancel request before it returns, rather than left there as a backend
// that would be granted the lock after the holder.
func TestPostgres_CancelledAcquire_LeavesNoWaiterInLockQueue(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a, b := newLocker(t, dsn), newLocker(t, dsn)
	admin := adminConn(t, dsn)
	k := randomKey("cancel")
	held, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, k, locker.WithTTL(time.Minute), locker.WithOwner("waiter"))
		errc <- err
	}()
	waitForLockWait(t, admin, "waiter")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
	}
	var waiters int
	if err := admin.QueryRow(ctxT(t, 10*time.Second),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiters); err != nil {
		t.Fatal(err)
	}
	if waiters != 0 {
		t.Fatalf("%d backends still wait for a lock after the cancelled Acquire returned", waiters)
	}
	if err := held.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestPostgres_PoolExhausted_TryAcquireFailsAcquireWaits: with every pool
// connection pinned by a held lock, TryAcquire fails at once with
// ErrUnavailable wrapping ErrPoolExhausted (never ErrLocked), Acquire waits
// within its context, and a release lets it through.
func TestPostgres_PoolExhausted_TryAcquireFailsAcquireWaits(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("max_conns", "2")
	u.RawQuery = q.Encode()
	l, err := locker.Open(ctxT(t, 10*time.Second), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	first, err := l.TryAcquire(ctxT(t, 10*time.Second), randomKey("pool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctxT(t, 10*time.Second), randomKey("pool")); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryAcquire(ctxT(t, 10*time.Second), randomKey("pool"))
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, postgres.ErrPoolExhausted) || errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire with the pool exhausted = %v, want ErrUnavailable wrapping ErrPoolExhausted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx, randomKey("pool")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with the pool exhausted = %v, want context.DeadlineExceeded", err)
	}
	errc := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctxT(t, 30*time.Second), randomKey("pool"))
		if err == nil {
			err = lease.Release(ctxT(t, 10*time.Second))
		}
		errc <- err
	}()
	if err := first.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Acquire after a release freed a connection: %v", err)
	}
}

// TestPostgres_CloseDuringRefreshAndRelease_NoRaceBothReturn: Close of a
// Locker while a Refresh and a Release of two of its leases are stuck
// sending their statement (the socket's send buffer full, as when the
// server stopped reading) — the root stops waiting for them after its
// clean-up budget and closes the backend — must not touch the pinned
// connections under the running statements: -race finds no race, both
// calls and Close return, and the server frees both rows.
func TestPostgres_CloseDuringRefreshAndRelease_NoRaceBothReturn(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	d := &stallDialer{}
	pc.ConnConfig.DialFunc = d.dial
	pool, err := pgxpool.NewWithConfig(ctxT(t, 10*time.Second), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	far, err := postgres.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	near := newLocker(t, dsn)

	k1, k2 := randomKey("close-refresh"), randomKey("close-release")
	var leases []locker.Lease
	for _, k := range []string{k1, k2} {
		lease, err := far.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute), locker.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	d.stall()
	errs := make(chan error, 2)
	go func() { errs <- leases[0].Refresh(ctxT(t, time.Minute)) }()
	go func() { errs <- leases[1].Release(ctxT(t, time.Minute)) }()
	d.waitStalled(t, 2)

	closed := make(chan error, 1)
	go func() { closed <- far.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Close did not return")
	}
	for range 2 {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a Refresh or Release stuck at Close succeeded")
			}
			t.Logf("call in flight at Close: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("a Refresh or Release in flight at Close did not return")
		}
	}
	for _, k := range []string{k1, k2} {
		lease, err := near.Acquire(ctxT(t, 30*time.Second), k)
		if err != nil {
			t.Fatalf("Acquire %q after the closed Locker's locks: %v", k, err)
		}
		if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// silentTTL is long enough for a check made right after the holder went
// silent to run, even on a loaded machine, while the server still holds the
// lock; heldUntilCutOff measures whether it did.
const silentTTL = 5 * time.Second

// heldUntilCutOff checks that a silent holder's lease on k, asked for at
// start with the given TTL, keeps k from other until the server's idle timer
// ends the holder's session (which it cannot before start+ttl), and that
// other then gets it with a larger token. It returns other's lease.
func heldUntilCutOff(t *testing.T, other locker.Locker, k string, start time.Time, ttl time.Duration, held locker.Lease) locker.Lease {
	t.Helper()
	next, err := other.TryAcquire(ctxT(t, 10*time.Second), k)
	switch elapsed := time.Since(start); {
	case elapsed < ttl && !errors.Is(err, locker.ErrLocked):
		t.Fatalf("TryAcquire %v after the silent holder asked for its lease (TTL %v) = %v, want ErrLocked", elapsed, ttl, err)
	case err == nil:
		// A loaded machine took past the TTL to get here: the lock has
		// already moved on, as it should.
		t.Logf("TryAcquire %v after the silent holder asked, past its TTL %v: the lock was already free", elapsed, ttl)
	case !errors.Is(err, locker.ErrLocked):
		t.Fatalf("TryAcquire after the silent holder's TTL = %v, want ErrLocked or a lease", err)
	default:
		if next, err = other.Acquire(ctxT(t, ttl+30*time.Second), k); err != nil {
			t.Fatalf("Acquire after the silent holder's TTL: %v", err)
		}
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token %d, want > %d", next.Token(), held.Token())
	}
	return next
}

// takeOver acquires k on l within d, once held's lock has ended, checks
// that the new token exceeds held's, and releases it.
func takeOver(t *testing.T, l locker.Locker, k string, d time.Duration, held locker.Lease, what string) {
	t.Helper()
	next, err := l.Acquire(ctxT(t, d), k)
	if err != nil {
		t.Fatalf("Acquire %s: %v", what, err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("token %d, want > %d", next.Token(), held.Token())
	}
	if err := next.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}
