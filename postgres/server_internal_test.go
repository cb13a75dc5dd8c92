package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/testenv"
)

// newTestBackend returns a backend over a pool of one connection, so that
// every acquisition meets the same connection.
func newTestBackend(t *testing.T) (*backend, *pgxpool.Pool) {
	t.Helper()
	return newTestBackendN(t, 1)
}

// newTestBackendN returns a backend over a pool of conns connections.
func newTestBackendN(t *testing.T, conns int32) (*backend, *pgxpool.Pool) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(testenv.PostgresDB(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := newBackend(pool, false, config{schema: DefaultSchema, table: DefaultTable}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, pool
}

func tryLock(t *testing.T, b *backend, key string) *lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dl, err := b.TryAcquire(ctx, &driver.Request{Key: key, TTL: 10 * time.Second, Lost: func(error) {}})
	if err != nil {
		t.Fatalf("TryAcquire %q: %v", key, err)
	}
	return dl.(*lock)
}

// connStateOf returns what the backend knows of the pool's one connection.
func connStateOf(t *testing.T, pool *pgxpool.Pool) (*connState, *pgxpool.Conn) {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := conn.Conn().PgConn().CustomData()[connStateKey].(*connState)
	if st == nil {
		conn.Release()
		t.Fatal("the connection has no state: it was never used for a lock")
	}
	return st, conn
}

// TestTransactionTimeout_ClearedOnlyWhereTheServerHasIt: the lock
// transaction clears transaction_timeout exactly on servers that have it
// (PostgreSQL 17 and later); on older ones (the test server is 15) the
// setting does not exist and naming it would fail every acquisition.
func TestTransactionTimeout_ClearedOnlyWhereTheServerHasIt(t *testing.T) {
	b, pool := newTestBackend(t)
	l := tryLock(t, b, "tt")
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, conn := connStateOf(t, pool)
	defer conn.Release()
	var version int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if want := version >= 170000; st.txTimeout != want {
		t.Fatalf("server %d: clears transaction_timeout = %v, want %v", version, st.txTimeout, want)
	}
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(context.Background(), settingsTxTimeoutSQL, "1000")
	var pgErr *pgconn.PgError
	switch {
	case st.txTimeout && err != nil:
		t.Fatalf("server %d: clearing transaction_timeout: %v", version, err)
	case !st.txTimeout && !(errors.As(err, &pgErr) && pgErr.Code == "42704"):
		t.Fatalf("server %d: clearing transaction_timeout = %v, want SQLSTATE 42704 (no such setting)", version, err)
	}
	t.Logf("server_version_num %d: transaction_timeout cleared: %v", version, st.txTimeout)
}

// TestRefresh_OnAnotherServerLife_ReportsLost: a refresh that finds the
// server's identity changed since the grant (what a pooler's connection
// meets after a failover or a restart) reports the lease lost and drops the
// lock. The server cannot be failed over here: the lock's record of the
// grant is changed instead.
func TestRefresh_OnAnotherServerLife_ReportsLost(t *testing.T) {
	b, _ := newTestBackend(t)
	l := tryLock(t, b, "failover")
	if err := l.Refresh(context.Background(), 10*time.Second); err != nil {
		t.Fatalf("Refresh on the granting server: %v", err)
	}
	l.ident.replayed = l.ident.start + 1 // granted by a promoted standby
	err := l.Refresh(context.Background(), 10*time.Second)
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Refresh on another server life = %v, want ErrLeaseLost", err)
	}
	t.Log(err)
	again := tryLock(t, b, "failover")
	if err := again.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAcquire_ConnectionOnAnotherServerLife_RaisesFloor: a connection that
// meets another server identity than the one it checked the token floor
// under (a pooler's connection that survived a failover: the connection is
// not new, and a promoted standby's start time is older than the tokens
// already issued) raises the floor to the server clock before taking a
// token. The sequence is put just above the server's start time, where no
// start-time check would catch it.
func TestAcquire_ConnectionOnAnotherServerLife_RaisesFloor(t *testing.T) {
	b, pool := newTestBackend(t)
	l := tryLock(t, b, "pooler")
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, conn := connStateOf(t, pool)
	if _, err := conn.Exec(context.Background(), "SELECT setval($1::regclass, $2)", b.n.sequence, st.ident.floor()+1); err != nil {
		t.Fatal(err)
	}
	st.ident.start-- // the floor was checked on another server life
	conn.Release()
	before := time.Now().UnixMicro()
	l = tryLock(t, b, "pooler")
	defer func() { _ = l.Release(context.Background()) }()
	if int64(l.token) < before {
		t.Fatalf("token %d on a connection that met another server life, want ≥ %d (the clock before the acquisition)", l.token, before)
	}
}

// TestAcquire_HolderSessionKeepsNoActivitySnapshot: reading
// pg_stat_activity in the lock transaction (does anyone watch?) makes the
// server copy every session's status, query text included, into memory
// it keeps until the transaction ends: 450 kB at max_connections=200, for
// as long as the lock is held, in every holder's session.
func TestAcquire_HolderSessionKeepsNoActivitySnapshot(t *testing.T) {
	b, _ := newTestBackend(t)
	l := tryLock(t, b, "k")
	conn, err := l.pause()
	if err != nil {
		t.Fatal(err)
	}
	var snapshots int
	err = conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'Backend Status Snapshot'").Scan(&snapshots)
	l.resume()
	if err != nil {
		t.Fatal(err)
	}
	if snapshots != 0 {
		t.Fatalf("the holder's session keeps %d backend status snapshots, want none", snapshots)
	}
}
