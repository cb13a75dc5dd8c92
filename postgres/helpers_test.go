package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/postgres"
)

// ctxT returns a context ending after d or with the test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func randomKey(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "/" + hex.EncodeToString(b[:])
}

// newLocker returns a Locker with a pool of its own (40 connections) over
// dsn, both closed with the test.
func newLocker(t testing.TB, dsn string, opts ...locker.Option) locker.Locker {
	t.Helper()
	l, err := postgres.New(sizedPool(t, dsn, 40), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newPool returns a pool over dsn, closed with the test.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctxT(t, 30*time.Second), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// sizedPool is newPool with room for n connections (pgxpool's default is
// the number of CPUs, at least 4).
func sizedPool(t testing.TB, dsn string, n int32) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = n
	pool, err := pgxpool.NewWithConfig(ctxT(t, 30*time.Second), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// adminConn is a plain connection for inspecting the server.
func adminConn(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t, 30*time.Second), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// holderPID finds the backend that holds a lock acquired WithOwner(label):
// the lock transaction sets application_name to "locker <token> <ttl> ="
// + label.
func holderPID(t testing.TB, admin *pgx.Conn, label string) int32 {
	t.Helper()
	var pid int32
	err := admin.QueryRow(ctxT(t, 10*time.Second),
		"SELECT pid FROM pg_stat_activity WHERE application_name ~ '^locker [0-9]+ [0-9]+ =' AND split_part(application_name, ' =', 2) = $1", label).Scan(&pid)
	if err != nil {
		t.Fatalf("finding the holder's backend: %v", err)
	}
	return pid
}

// waitForLockWait returns once the Acquire labelled owner waits in the
// server's lock queue.
func waitForLockWait(t *testing.T, admin *pgx.Conn, owner string) {
	t.Helper()
	give := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(give) {
			t.Fatalf("the Acquire of %q never waited for the lock", owner)
		}
		var waiting bool
		err := admin.QueryRow(ctxT(t, 10*time.Second),
			"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock')", "locker "+owner).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
