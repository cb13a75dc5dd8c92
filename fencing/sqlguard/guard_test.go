package sqlguard_test

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/fencing/sqlguard"
	"github.com/distlock/locker/internal/guardtest"
)

// TestGuard_AdmitsNonDecreasingTokens_RefusesStale: the guard's promise as
// a fencing.Guard, resource by resource, with the dialect detected from
// the driver.
func TestGuard_AdmitsNonDecreasingTokens_RefusesStale(t *testing.T) {
	forEachEngine(t, func(t *testing.T, _ engine, db *sql.DB) {
		g, err := sqlguard.New(db)
		if err != nil {
			t.Fatal(err)
		}
		var _ fencing.Guard = g
		ctx := ctxT(t, 30*time.Second)
		guardtest.AdmitOrder(ctx, t, g)
		for _, step := range []struct {
			token uint64
			stale bool
		}{{math.MaxInt64, false}, {math.MaxInt64 - 1, true}} {
			if err := g.Admit(ctx, "max", step.token); step.stale != errors.Is(err, fencing.ErrStaleToken) || (!step.stale && err != nil) {
				t.Fatalf("Admit(max, %d) = %v, stale %v", step.token, err, step.stale)
			}
		}
		if err := g.Admit(ctx, "r", 6); err == nil || !strings.Contains(err.Error(), `"r": token 6, already admitted 7`) {
			t.Fatalf("Admit(r, 6) = %v, want the resource and both tokens in the error", err)
		}
		if err := g.Admit(ctx, "r", math.MaxInt64+1); !errors.Is(err, sqlguard.ErrTokenRange) {
			t.Fatalf("Admit of 2^63 = %v, want ErrTokenRange", err)
		}
		for _, bad := range []string{"", "a\x00b", "\xff"} {
			if err := g.Admit(ctx, bad, 9); !errors.Is(err, locker.ErrInvalidKey) {
				t.Fatalf("Admit of resource %q = %v, want ErrInvalidKey", bad, err)
			}
		}
	})
}

// TestGuard_Write_StaleSkipsFn_FailedFnRollsBackAdmission: Write applies
// fn only under an admitted token, and an fn that fails takes its
// admission down with its write.
func TestGuard_Write_StaleSkipsFn_FailedFnRollsBackAdmission(t *testing.T) {
	forEachEngine(t, func(t *testing.T, _ engine, db *sql.DB) {
		exec(t, db, "CREATE TABLE items (token bigint NOT NULL)")
		g, err := sqlguard.New(db)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t, 30*time.Second)
		insert := func(token uint64) func(*sql.Tx) error {
			return func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO items (token) VALUES (%d)", token))
				return err
			}
		}
		if err := g.Write(ctx, "res", 10, insert(10)); err != nil {
			t.Fatal(err)
		}
		called := false
		err = g.Write(ctx, "res", 5, func(*sql.Tx) error { called = true; return nil })
		if !errors.Is(err, fencing.ErrStaleToken) || called {
			t.Fatalf("Write(5) after 10 = %v, fn called %v; want ErrStaleToken, not called", err, called)
		}
		failed := errors.New("write failed")
		err = g.Write(ctx, "res", 20, func(tx *sql.Tx) error {
			if err := insert(20)(tx); err != nil {
				return err
			}
			return failed
		})
		if !errors.Is(err, failed) {
			t.Fatalf("Write with a failing fn = %v, want its error", err)
		}
		if err := g.Write(ctx, "res", 15, nil); err != nil {
			t.Fatalf("Write(15) after the admission of 20 rolled back: %v", err)
		}
		var n, max int
		if err := db.QueryRowContext(ctx, "SELECT count(*), max(token) FROM items").Scan(&n, &max); err != nil || n != 1 || max != 10 {
			t.Fatalf("items: %d, highest token %d (%v); want only the write under token 10", n, max, err)
		}
	})
}

// TestGuard_AdmitTx_CountsOnlyWhenCallerCommits: inside the caller's
// transaction the admission becomes the highest only at commit (on SQLite,
// the first, rolled back, also takes the table it created with it).
func TestGuard_AdmitTx_CountsOnlyWhenCallerCommits(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine, db *sql.DB) {
		g, err := sqlguard.New(db, sqlguard.WithSchema(e.schema), sqlguard.WithTable(`fences "of" app`))
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t, 30*time.Second)
		if err := g.AdmitTx(ctx, nil, "res", 1); !errors.Is(err, locker.ErrInvalidOption) {
			t.Fatalf("AdmitTx with a nil tx = %v, want ErrInvalidOption", err)
		}
		admitIn := func(token uint64, commit bool) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := g.AdmitTx(ctx, tx, "res", token); err != nil {
				_ = tx.Rollback()
				return err
			}
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		}
		if err := admitIn(20, false); err != nil {
			t.Fatal(err)
		}
		if err := admitIn(10, true); err != nil {
			t.Fatalf("AdmitTx(10) after a rolled-back 20: %v", err)
		}
		if err := admitIn(9, true); !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("AdmitTx(9) after a committed 10 = %v, want ErrStaleToken", err)
		}
	})
}

// TestGuard_WithCreateTableFalse_MissingTableIsAnError_NotStale: without
// the table the guard reports the database's error, never a verdict.
func TestGuard_WithCreateTableFalse_MissingTableIsAnError_NotStale(t *testing.T) {
	forEachEngine(t, func(t *testing.T, _ engine, db *sql.DB) {
		g, err := sqlguard.New(db, sqlguard.WithCreateTable(false))
		if err != nil {
			t.Fatal(err)
		}
		err = g.Admit(ctxT(t, 30*time.Second), "res", 1)
		if err == nil || errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Admit without a table = %v, want the database's error", err)
		}
	})
}

// noDialect is a driver of no known dialect; it is never connected.
type noDialect struct{}

func (noDialect) Open(string) (driver.Conn, error) { return nil, errors.New("not a database") }

func init() { sql.Register("sqlguard-test-nodialect", noDialect{}) }

func TestNew_RefusesBadOptions(t *testing.T) {
	unknown, err := sql.Open("sqlguard-test-nodialect", "")
	if err != nil {
		t.Fatal(err)
	}
	defer unknown.Close()
	for name, c := range map[string]struct {
		db   *sql.DB
		opts []sqlguard.Option
	}{
		"nil db":           {nil, nil},
		"unknown driver":   {unknown, nil},
		"unknown dialect":  {unknown, []sqlguard.Option{sqlguard.WithDialect(sqlguard.Dialect(9))}},
		"empty table":      {unknown, []sqlguard.Option{sqlguard.WithDialect(sqlguard.SQLite), sqlguard.WithTable("")}},
		"64-byte table":    {unknown, []sqlguard.Option{sqlguard.WithDialect(sqlguard.SQLite), sqlguard.WithTable(strings.Repeat("t", 64))}},
		"table with NUL":   {unknown, []sqlguard.Option{sqlguard.WithDialect(sqlguard.PostgreSQL), sqlguard.WithTable("a\x00b")}},
		"schema not UTF-8": {unknown, []sqlguard.Option{sqlguard.WithDialect(sqlguard.PostgreSQL), sqlguard.WithSchema("\xff")}},
	} {
		if _, err := sqlguard.New(c.db, c.opts...); !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := sqlguard.New(unknown, sqlguard.WithDialect(sqlguard.PostgreSQL), nil); err != nil {
		t.Errorf("New with WithDialect over an unknown driver = %v, want a Guard", err)
	}
}

// TestGuard_AdmitTx_FirstUseOnOneConnectionSQLite: SQLite databases are
// often opened with one connection (SetMaxOpenConns(1)); an AdmitTx that
// comes first, while its transaction holds that connection, must still
// create the table instead of waiting for a connection until ctx ends.
func TestGuard_AdmitTx_FirstUseOnOneConnectionSQLite(t *testing.T) {
	db := openSQLite("")(t)
	db.SetMaxOpenConns(1)
	g, err := sqlguard.New(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AdmitTx(ctx, tx, "res", 5); err != nil {
		_ = tx.Rollback()
		t.Fatalf("AdmitTx as the first use on a one-connection pool: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "res", 4); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(4) after AdmitTx(5) committed = %v, want ErrStaleToken", err)
	}
}
