package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// TestPostgres_RoleDefaultTimeouts_DoNotEndWaitOrHold: with the role's
// defaults in the database at statement_timeout = lock_timeout = 300 ms
// (and transaction_timeout on servers that have it), an Acquire still waits
// longer than that and a lease is still held longer than that: the lock
// transaction clears them, so only the caller's context bounds a wait and
// only the TTL of silence bounds a hold.
func TestPostgres_RoleDefaultTimeouts_DoNotEndWaitOrHold(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	admin := adminConn(t, dsn)
	var db string
	var hasTxTimeout bool
	if err := admin.QueryRow(ctxT(t, 10*time.Second),
		"SELECT current_database(), EXISTS (SELECT 1 FROM pg_settings WHERE name = 'transaction_timeout')").Scan(&db, &hasTxTimeout); err != nil {
		t.Fatal(err)
	}
	settings := []string{"statement_timeout", "lock_timeout"}
	if hasTxTimeout {
		settings = append(settings, "transaction_timeout")
	}
	for _, s := range settings {
		// Dropped with the database.
		if _, err := admin.Exec(ctxT(t, 10*time.Second),
			"ALTER ROLE CURRENT_USER IN DATABASE "+pgx.Identifier{db}.Sanitize()+" SET "+s+" = '300ms'"); err != nil {
			t.Fatal(err)
		}
	}
	// Not vacuous: a new session has the defaults.
	var st string
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SHOW statement_timeout").Scan(&st); err != nil || st != "300ms" {
		t.Fatalf("statement_timeout of a new session = %q, %v; want 300ms", st, err)
	}

	a, b := newLocker(t, dsn), newLocker(t, dsn)
	k := randomKey("role-timeouts")
	held, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(10*time.Second), locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease locker.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		lease, err := b.Acquire(ctxT(t, time.Minute), k, locker.WithTTL(10*time.Second), locker.WithOwner("patient"))
		got <- result{lease, err}
	}()
	waitForLockWait(t, admin, "patient")
	// Wait and hold well past the role's timeouts (not an assertion on
	// time: the server is what would end them).
	time.Sleep(1500 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("Acquire returned while the lock was held: %v, %v", r.lease, r.err)
	default:
	}
	if err := held.Err(); err != nil {
		t.Fatalf("holder's lease ended while held past the role's timeouts: %v", err)
	}
	if err := held.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Release after a long hold: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after a long wait: %v", r.err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := r.lease.Refresh(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Refresh after a long hold: %v", err)
	}
	if err := r.lease.Release(ctxT(t, 10*time.Second)); errors.Is(err, locker.ErrLeaseLost) || err != nil {
		t.Fatalf("Release after a long hold: %v", err)
	}
}
