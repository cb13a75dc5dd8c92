package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// heldAdvisory counts the advisory locks held in the test's database and
// the sessions holding them.
func heldAdvisory(t *testing.T, admin *pgx.Conn) (locks, sessions int) {
	t.Helper()
	err := admin.QueryRow(ctxT(t, 30*time.Second), "SELECT count(*), count(DISTINCT pid) FROM pg_locks "+
		"WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").
		Scan(&locks, &sessions)
	if err != nil {
		t.Fatal(err)
	}
	return locks, sessions
}

// TestAdvisory_TenThousandLocksOnEightConnections: one Locker in the
// advisory mode holds 10,000 locks at once on at most 8 server sessions,
// and releases each on its own.
func TestAdvisory_TenThousandLocksOnEightConnections(t *testing.T) {
	const n, workers = 10_000, 16
	dsn := testenv.PostgresDB(t)
	// A TTL long enough that no refresh runs while the test does.
	l := newLocker(t, dsn, postgres.WithMode(postgres.Advisory), locker.WithTTL(10*time.Minute))
	admin := adminConn(t, dsn)
	leases := make([]locker.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				lease, err := l.TryAcquire(ctxT(t, time.Minute), fmt.Sprintf("many/%d", i))
				if err != nil {
					errs <- fmt.Errorf("TryAcquire #%d: %w", i, err)
					return
				}
				leases[i] = lease
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	locks, sessions := heldAdvisory(t, admin)
	if locks != n || sessions > 8 {
		t.Fatalf("%d advisory locks on %d sessions, want %d on at most 8", locks, sessions, n)
	}
	t.Logf("%d advisory locks on %d sessions", locks, sessions)
	// Each release frees its own lock and no other.
	for i := 0; i < n; i += 2 {
		if err := leases[i].Release(ctxT(t, time.Minute)); err != nil {
			t.Fatalf("Release #%d: %v", i, err)
		}
	}
	if locks, _ := heldAdvisory(t, admin); locks != n/2 {
		t.Fatalf("%d advisory locks after releasing half, want %d", locks, n/2)
	}
	other := newLocker(t, dsn, postgres.WithMode(postgres.Advisory))
	if _, err := other.TryAcquire(ctxT(t, time.Minute), "many/1"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire of a held key from another Locker = %v, want ErrLocked", err)
	}
	lease, err := other.TryAcquire(ctxT(t, time.Minute), "many/0")
	if err != nil {
		t.Fatalf("TryAcquire of a released key from another Locker: %v", err)
	}
	if lease.Token() <= leases[n-1].Token() {
		t.Fatalf("token %d after the release, want above every earlier one (%d)", lease.Token(), leases[n-1].Token())
	}
}

// TestAdvisory_ConnectionEnds_EveryLockOnItLost: when a shared connection
// ends (here its server backend is terminated), every lease whose lock it
// held is told ErrLeaseLost, and the locks are free for others.
func TestAdvisory_ConnectionEnds_EveryLockOnItLost(t *testing.T) {
	const n = 20
	dsn := testenv.PostgresDB(t)
	l := newLocker(t, dsn, postgres.WithMode(postgres.Advisory), locker.WithTTL(10*time.Second))
	admin := adminConn(t, dsn)
	leases := make([]locker.Lease, n)
	for i := range leases {
		lease, err := l.TryAcquire(ctxT(t, time.Minute), fmt.Sprintf("lost/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = lease
	}
	if _, err := admin.Exec(ctxT(t, 30*time.Second), "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "+
		"AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"); err != nil {
		t.Fatal(err)
	}
	// The first refresh that meets the ended connection ends every lease
	// on it (the others learn through Request.Lost, not by refreshing).
	if err := leases[0].Refresh(ctxT(t, time.Minute)); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Refresh after the connection ended = %v, want ErrLeaseLost", err)
	}
	for i, lease := range leases {
		select {
		case <-lease.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("lease #%d still not ended", i)
		}
		if err := lease.Err(); !errors.Is(err, locker.ErrLeaseLost) {
			t.Fatalf("lease #%d: Err() = %v, want ErrLeaseLost", i, err)
		}
	}
	other := newLocker(t, dsn, postgres.WithMode(postgres.Advisory))
	for i := range leases {
		if _, err := other.TryAcquire(ctxT(t, time.Minute), fmt.Sprintf("lost/%d", i)); err != nil {
			t.Fatalf("TryAcquire #%d after the connection ended: %v", i, err)
		}
	}
	// The Locker opens a new connection for its next lock.
	if _, err := l.TryAcquire(ctxT(t, time.Minute), "lost/after"); err != nil {
		t.Fatalf("TryAcquire on the Locker whose connection ended: %v", err)
	}
}

// TestOpen_ModeParameter: ?mode=advisory opens the advisory mode (its
// locks are advisory locks, not rows); an unknown mode is ErrInvalidURL.
func TestOpen_ModeParameter(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("mode", "advisory")
	u.RawQuery = q.Encode()
	l, err := locker.Open(ctxT(t, 30*time.Second), u.String())
	if err != nil {
		t.Fatalf("Open(mode=advisory): %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if _, err := l.TryAcquire(ctxT(t, 30*time.Second), "by-url"); err != nil {
		t.Fatal(err)
	}
	if locks, _ := heldAdvisory(t, adminConn(t, dsn)); locks != 1 {
		t.Fatalf("%d advisory locks, want 1", locks)
	}
	q.Set("mode", "sideways")
	u.RawQuery = q.Encode()
	if _, err := locker.Open(ctxT(t, 30*time.Second), u.String()); !errors.Is(err, locker.ErrInvalidURL) {
		t.Fatalf("Open(mode=sideways) = %v, want ErrInvalidURL", err)
	}
}

// TestAdvisory_SilentClient_CutOffByServerAfterTTL: a client that stops
// talking (its sockets stay open, nothing flows) keeps its advisory locks
// until idle_session_timeout ends its session, a TTL after its last
// statement: the lock is free with nobody releasing it.
func TestAdvisory_SilentClient_CutOffByServerAfterTTL(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	h := newHarness(t, dsn)
	h.opts = []locker.Option{postgres.WithMode(postgres.Advisory)}
	silent, err := h.NewLocker(ctxT(t, 10*time.Second), t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	other := newLocker(t, dsn, postgres.WithMode(postgres.Advisory))

	k := randomKey("silent")
	start := time.Now()
	held, err := silent.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(silentTTL))
	if err != nil {
		t.Fatal(err)
	}
	h.Crash(t, silent)
	next := heldUntilCutOff(t, other, k, start, silentTTL, held)
	if err := next.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisory_KilledAndRestarted_TokensAfterExceedTokensBefore: PostgreSQL
// is SIGKILLed while advisory locks are held; every lease on the dead
// sessions ends (at its next statement), and every token handed out after
// the restart is larger than every token before.
func TestAdvisory_KilledAndRestarted_TokensAfterExceedTokensBefore(t *testing.T) {
	killAndRestart(t, true, postgres.WithMode(postgres.Advisory))
}

// TestAdvisory_SmallPool_AcquireCanStillWait: shared connections never take
// the whole budget, so a blocking Acquire of a held key still finds a
// connection to wait on.
func TestAdvisory_SmallPool_AcquireCanStillWait(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	pc := mustPoolConfig(t, dsn)
	pc.MaxConns = 5 // a budget of 4 connections
	pool, err := pgxpool.NewWithConfig(ctxT(t, 30*time.Second), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := postgres.New(pool, postgres.WithMode(postgres.Advisory))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	// Many acquisitions at once open as many shared connections as allowed.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				lease, err := l.TryAcquire(ctxT(t, time.Minute), fmt.Sprintf("small/%d/%d", w, i))
				if err != nil {
					t.Errorf("TryAcquire: %v", err)
					return
				}
				defer func() { _ = lease.Release(ctxT(t, time.Minute)) }()
			}
		}()
	}
	wg.Wait()
	other := newLocker(t, dsn, postgres.WithMode(postgres.Advisory))
	held, err := other.TryAcquire(ctxT(t, 10*time.Second), "small/held")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = held.Release(context.Background()) })
	takeOver(t, l, "small/held", 20*time.Second, held, "of a key released meanwhile, with a small pool")
}

// refreshCounter counts the advisory mode's refresh statements that a pool's
// connections send to the server.
type refreshCounter struct{ n atomic.Int64 }

func (r *refreshCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(q.SQL, "SELECT set_config('idle_session_timeout', $1, false), ") && strings.HasSuffix(q.SQL, "pg_is_in_recovery()") {
		r.n.Add(1)
	}
	return ctx
}

func (r *refreshCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestAdvisory_ConcurrentRefreshes_ShareStatements: one statement restarts
// the idle timer of every lock on its session, so the Refreshes of locks
// held on the same few sessions, called at once, share statements — a
// Locker holding 10,000 locks does not send 2,000 refreshes a second ahead
// of its next Acquire — and every one of them still succeeds.
func TestAdvisory_ConcurrentRefreshes_ShareStatements(t *testing.T) {
	const n = 400
	dsn := testenv.PostgresDB(t)
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	counter := &refreshCounter{}
	pc.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := postgres.New(pool, postgres.WithMode(postgres.Advisory), locker.WithTTL(10*time.Minute), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx := ctxT(t, 2*time.Minute)
	leases := make([]locker.Lease, n)
	for i := range leases {
		if leases[i], err = l.TryAcquire(ctx, fmt.Sprintf("refresh/%d", i)); err != nil {
			t.Fatalf("TryAcquire #%d: %v", i, err)
		}
	}
	before := counter.n.Load()
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i, lease := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := lease.Refresh(ctx); err != nil {
				errs <- fmt.Errorf("Refresh #%d: %w", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	statements := counter.n.Load() - before
	t.Logf("%d concurrent Refreshes sent %d refresh statements", n, statements)
	if statements < 1 || statements > n/4 {
		t.Errorf("%d concurrent Refreshes sent %d refresh statements, want 1 to %d", n, statements, n/4)
	}
	for _, lease := range leases {
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release after the shared refreshes: %v", err)
		}
	}
}

// TestAdvisory_Handoffs_ReuseWaitersSessions: a waiter waits on a session
// of its own; once the lock it was granted there is released, the session
// serves the next waiter instead of being closed, so a run of handoffs
// does not open a server connection (a new server process) for each.
func TestAdvisory_Handoffs_ReuseWaitersSessions(t *testing.T) {
	const handoffs = 20
	dsn := testenv.PostgresDB(t)
	pool := newPool(t, dsn)
	l, err := postgres.New(pool, postgres.WithMode(postgres.Advisory))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	admin := adminConn(t, dsn)
	ctx := ctxT(t, 2*time.Minute)
	held, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	before := pool.Stat().NewConnsCount()
	for i := range handoffs {
		next := make(chan locker.Lease, 1)
		failed := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, "k")
			if err != nil {
				failed <- err
				return
			}
			next <- lease
		}()
		waitForAdvisoryWait(t, admin)
		if err := held.Release(ctx); err != nil {
			t.Fatalf("handoff %d: Release: %v", i+1, err)
		}
		select {
		case held = <-next:
		case err := <-failed:
			t.Fatalf("handoff %d: Acquire: %v", i+1, err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	opened := pool.Stat().NewConnsCount() - before
	t.Logf("%d handoffs opened %d connections", handoffs, opened)
	if opened > 3 {
		t.Errorf("%d handoffs opened %d connections, want at most 3 (the waiters' sessions reused)", handoffs, opened)
	}
}

// waitForAdvisoryWait returns once a session of the test's database waits
// for an advisory lock.
func waitForAdvisoryWait(t *testing.T, admin *pgx.Conn) { waitForAdvisoryWaiters(t, admin, 1) }

// waitForAdvisoryWaiters returns once n sessions of the test's database
// wait for an advisory lock.
func waitForAdvisoryWaiters(t *testing.T, admin *pgx.Conn, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		err := admin.QueryRow(ctxT(t, 30*time.Second), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "+
			"AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions waited for an advisory lock after a minute, want %d", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdvisory_ManyWaiters_ReuseTheirSessions: a round of waiters, more
// than the Locker kept spare sessions for until 2026-12-02 (32), queue
// behind a holder, each on a session of its own, and are granted in turn;
// the sessions they release serve the next round's waiters instead of
// being closed. The peers run's handoff at 128 waiters opened a server
// connection, a new server process, for 96 of every round's waiters: 0.15
// × pg_advisory_lock.
func TestAdvisory_ManyWaiters_ReuseTheirSessions(t *testing.T) {
	const waiters = 48
	dsn := testenv.PostgresDB(t)
	pool, l := advisoryOnPool(t, dsn, waiters+8)
	admin := adminConn(t, dsn)
	waitersRound(t, l, admin, waiters)
	before := pool.Stat().NewConnsCount()
	waitersRound(t, l, admin, waiters)
	opened := pool.Stat().NewConnsCount() - before
	t.Logf("a second round of %d waiters opened %d connections", waiters, opened)
	if opened > 2 {
		t.Errorf("a second round of %d waiters opened %d connections, want the first round's sessions reused", waiters, opened)
	}
}

// TestAdvisory_SpareSessions_ClosedWhenIdle: the sessions a round of
// waiters leaves as spares are closed once unused for the spare idle time,
// while the Locker stays open and idle.
func TestAdvisory_SpareSessions_ClosedWhenIdle(t *testing.T) {
	const waiters = 6
	postgres.SetSpareIdle(t, 500*time.Millisecond)
	dsn := testenv.PostgresDB(t)
	pool, l := advisoryOnPool(t, dsn, waiters+8)
	waitersRound(t, l, adminConn(t, dsn), waiters)
	pinned := pool.Stat().AcquiredConns()
	if pinned < waiters {
		t.Fatalf("%d connections pinned after the round, want the %d waiters' sessions kept as spares", pinned, waiters)
	}
	deadline := time.Now().Add(time.Minute)
	for pool.Stat().AcquiredConns() > pinned-waiters {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still pinned a minute after the round (%d right after it), want the %d spares closed after 500 ms unused",
				pool.Stat().AcquiredConns(), pinned, waiters)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// advisoryOnPool returns an advisory Locker with a budget of n
// connections, on a pool of its own with room for them.
func advisoryOnPool(t *testing.T, dsn string, n int32) (*pgxpool.Pool, locker.Locker) {
	t.Helper()
	pool := sizedPool(t, dsn, n)
	l, err := postgres.New(pool, postgres.WithMode(postgres.Advisory), postgres.WithMaxConns(int(n)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return pool, l
}

// waitersRound has n waiters queue behind a holder of one key, each on a
// session of its own, and returns once each was granted it and released.
func waitersRound(t *testing.T, l locker.Locker, admin *pgx.Conn, n int) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	held, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, "k")
			if err == nil {
				err = lease.Release(ctx)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	waitForAdvisoryWaiters(t, admin, n)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestAdvisory_LocksTakenOneAfterAnother_SpreadOverSessions: locks taken
// one after another, each on an idle shared session, are spread over the
// Locker's shared sessions rather than all put on the first. Every
// statement on a session costs the server about 40 ns per advisory lock
// the session holds (docs/design/postgres.md, *The advisory mode*), so a
// session holding all of a Locker's locks slows each of its statements.
func TestAdvisory_LocksTakenOneAfterAnother_SpreadOverSessions(t *testing.T) {
	const n = 1024
	dsn := testenv.PostgresDB(t)
	l := newLocker(t, dsn, postgres.WithMode(postgres.Advisory), locker.WithTTL(10*time.Minute))
	admin := adminConn(t, dsn)
	for i := range n {
		if _, err := l.TryAcquire(ctxT(t, time.Minute), fmt.Sprintf("one-after-another/%d", i)); err != nil {
			t.Fatalf("TryAcquire #%d: %v", i, err)
		}
	}
	var sessions, most int
	err := admin.QueryRow(ctxT(t, 30*time.Second), "SELECT count(*), max(n) FROM (SELECT count(*) AS n FROM pg_locks "+
		"WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "+
		"GROUP BY pid) AS per_session").Scan(&sessions, &most)
	if err != nil {
		t.Fatal(err)
	}
	if most > n/postgres.SharedConns {
		t.Fatalf("%d locks taken one after another: %d sessions, the busiest holding %d; want none above %d",
			n, sessions, most, n/postgres.SharedConns)
	}
}
