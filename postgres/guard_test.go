package postgres_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// TestGuard_AdmitsNonDecreasingTokens_RefusesStale: the guard's promise as
// a fencing.Guard, resource by resource.
func TestGuard_AdmitsNonDecreasingTokens_RefusesStale(t *testing.T) {
	g, err := postgres.NewGuard(newPool(t, testenv.PostgresDB(t)))
	if err != nil {
		t.Fatal(err)
	}
	var _ fencing.Guard = g
	ctx := ctxT(t, 30*time.Second)
	for _, step := range []struct {
		resource string
		token    uint64
		stale    bool
	}{
		{"r", 5, false}, {"r", 5, false}, {"r", 7, false}, {"r", 6, true}, {"other", 1, false},
		{"r", 7, false}, {"r'; DROP TABLE locker_fences; --", 1, false}, {"r", 1, true},
	} {
		err := g.Admit(ctx, step.resource, step.token)
		if step.stale != errors.Is(err, fencing.ErrStaleToken) || (!step.stale && err != nil) {
			t.Fatalf("Admit(%q, %d) = %v, stale %v", step.resource, step.token, err, step.stale)
		}
	}
	if err := g.Admit(ctx, "r", 0); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit of token 0 = %v, want ErrStaleToken", err)
	}
	if err := g.Admit(ctx, "r", math.MaxUint64); !errors.Is(err, postgres.ErrTokenRange) {
		t.Fatalf("Admit of 2^64-1 = %v, want ErrTokenRange", err)
	}
	if err := g.Admit(ctx, "a\x00b", 9); !errors.Is(err, locker.ErrInvalidKey) {
		t.Fatalf("Admit of a resource with NUL = %v, want ErrInvalidKey", err)
	}
}

// TestGuard_AdmitTx_RolledBackAdmissionDoesNotCount_ConcurrentStaleWaitsAndIsRefused:
// inside the caller's transaction, an admission counts only if the
// transaction commits; and a writer with a lower token that arrives while
// a higher one's transaction is open waits for it and is then refused.
func TestGuard_AdmitTx_RolledBackAdmissionDoesNotCount_ConcurrentStaleWaitsAndIsRefused(t *testing.T) {
	pool := newPool(t, testenv.PostgresDB(t))
	g, err := postgres.NewGuard(pool, postgres.WithGuardTable("fences"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := g.Admit(ctx, "res", 10); err != nil {
		t.Fatal(err)
	}
	rolledBack := errors.New("write failed")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := g.AdmitTx(ctx, tx, "res", 20); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "res", 15); err != nil {
		t.Fatalf("Admit(15) after the admission of 20 rolled back: %v", err)
	}

	high, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AdmitTx(ctx, high, "res", 30); err != nil {
		t.Fatal(err)
	}
	staleErr := make(chan error, 1)
	go func() {
		staleErr <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return g.AdmitTx(ctx, tx, "res", 25)
		})
	}()
	select {
	case err := <-staleErr:
		t.Fatalf("the stale writer did not wait for the open higher admission: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := high.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-staleErr; !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale writer = %v, want ErrStaleToken", err)
	}
}

// TestGuard_Write_AdmitsAndWritesTogether_StaleWritesNothing: Write commits
// the admission and the caller's write together; a stale token runs no
// write; a failing write takes its admission back with it.
func TestGuard_Write_AdmitsAndWritesTogether_StaleWritesNothing(t *testing.T) {
	pool := newPool(t, testenv.PostgresDB(t))
	g, err := postgres.NewGuard(pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if _, err := pool.Exec(ctx, "CREATE TABLE ledger (token bigint)"); err != nil {
		t.Fatal(err)
	}
	insert := func(token uint64) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1)", int64(token))
			return err
		}
	}
	if err := g.Write(ctx, "ledger", 5, insert(5)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("write failed")
	if err := g.Write(ctx, "ledger", 9, func(pgx.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Write whose fn fails = %v, want its error", err)
	}
	// 9's admission was rolled back with its write: 7 is still admitted.
	if err := g.Write(ctx, "ledger", 7, insert(7)); err != nil {
		t.Fatalf("Write of 7 after a failed write of 9: %v", err)
	}
	called := false
	err = g.Write(ctx, "ledger", 6, func(pgx.Tx) error { called = true; return nil })
	if !errors.Is(err, fencing.ErrStaleToken) || called {
		t.Fatalf("Write of a stale token = %v (fn called: %v), want ErrStaleToken without calling fn", err, called)
	}
	var got []int64
	rows, _ := pool.Query(ctx, "SELECT token FROM ledger ORDER BY token")
	got, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(got) != 2 || got[0] != 5 || got[1] != 7 {
		t.Fatalf("ledger = %v, %v; want [5 7]", got, err)
	}
}
