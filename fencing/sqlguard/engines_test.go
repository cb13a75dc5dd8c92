package sqlguard_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"

	"github.com/distlock/locker/internal/testenv"
)

// engine is one real database the guard is tested on.
type engine struct {
	name   string
	schema string // the schema every table is in by default
	open   func(t testing.TB) *sql.DB
}

func engines() []engine {
	return []engine{
		{"sqlite", "main", openSQLite("")},
		{"sqlite-wal", "main", openSQLite("&_pragma=journal_mode(WAL)")},
		{"postgres", "public", openPostgres},
	}
}

// forEachEngine runs f on a fresh database of each engine.
func forEachEngine(t *testing.T, f func(t *testing.T, e engine, db *sql.DB)) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) { f(t, e, e.open(t)) })
	}
}

// openSQLite opens a database file of the test's own, with a busy timeout
// long enough for any wait in these tests even on a loaded machine.
func openSQLite(params string) func(t testing.TB) *sql.DB {
	return func(t testing.TB) *sql.DB {
		path := filepath.Join(t.TempDir(), "guard.sqlite")
		return openDB(t, "sqlite", "file:"+path+"?_pragma=busy_timeout(60000)"+params)
	}
}

func openPostgres(t testing.TB) *sql.DB { return openDB(t, "pgx", testenv.PostgresDB(t)) }

func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctxT(t, 30*time.Second), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
