package postgres_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// TestPostgres_SQLMetacharacterKeys_ArePlainDistinctKeys: keys are bound
// parameters (bytea), never spliced into SQL: quotes, backslashes, LIKE
// wildcards and SQL fragments are ordinary, distinct keys, and the table
// survives them.
func TestPostgres_SQLMetacharacterKeys_ArePlainDistinctKeys(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a, b := newLocker(t, dsn), newLocker(t, dsn)
	keys := []string{
		"a", "a%", "%", "a_", "_", "'", "''", `\`, `\\`, `"`, `a\'b`, "$1", "?",
		"x'; DROP TABLE locker_locks; --", "x\"); DELETE FROM locker_locks; --",
		"k' OR '1'='1", "é", "\u2028", strings.Repeat("z", locker.MaxKeyLen),
	}
	var held []locker.Lease
	for _, k := range keys {
		lease, err := a.TryAcquire(ctxT(t, 10*time.Second), k)
		if err != nil {
			t.Fatalf("TryAcquire(%q) while the other keys are held: %v", k, err)
		}
		held = append(held, lease)
	}
	for _, k := range keys {
		if _, err := b.TryAcquire(ctxT(t, 10*time.Second), k); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryAcquire(%q) by another client = %v, want ErrLocked", k, err)
		}
	}
	for _, lease := range held {
		if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM locker_locks").Scan(&rows); err != nil {
		t.Fatalf("the lock table after the hostile keys: %v", err)
	}
	if rows != len(keys) {
		t.Fatalf("%d rows for %d distinct keys", rows, len(keys))
	}
}

// TestPostgres_NamespacedKey_StoredWithNULSeparator: a namespaced key is
// stored as namespace, NUL, key — bytea holds the NUL that text cannot —
// and never collides with a plain key or another namespace's split.
func TestPostgres_NamespacedKey_StoredWithNULSeparator(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	plain := newLocker(t, dsn)
	nsA := newLocker(t, dsn, locker.WithNamespace("a"))
	nsAB := newLocker(t, dsn, locker.WithNamespace("a/b"))

	l1, err := nsA.TryAcquire(ctxT(t, 10*time.Second), "b/c")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		l   locker.Locker
		key string
	}{{nsAB, "c"}, {plain, "a/b/c"}, {plain, "b/c"}, {plain, "a"}} {
		lease, err := c.l.TryAcquire(ctxT(t, 10*time.Second), c.key)
		if err != nil {
			t.Fatalf("TryAcquire(%q) collides with namespace a, key b/c: %v", c.key, err)
		}
		if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var stored bool
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second),
		`SELECT EXISTS (SELECT 1 FROM locker_locks WHERE key = '\x6100622f63'::bytea)`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !stored {
		t.Fatal(`no row with key 'a' NUL 'b/c'`)
	}
	if err := l1.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestPostgres_OddTableNames_AreQuoted: schema and table names with quotes,
// spaces, dots and SQL fragments are quoted identifiers, created and used
// as such.
func TestPostgres_OddTableNames_AreQuoted(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	schema, table := `we"ird sch.ema`, `t"; DROP TABLE x; --`
	a := newLocker(t, dsn, postgres.WithSchema(schema), postgres.WithTable(table))
	b := newLocker(t, dsn, postgres.WithSchema(schema), postgres.WithTable(table))
	other := newLocker(t, dsn) // another table: independent locks
	lease, err := a.TryAcquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctxT(t, 10*time.Second), "k"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire on the same odd table = %v, want ErrLocked", err)
	}
	l2, err := other.TryAcquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatalf("TryAcquire on the default table: %v", err)
	}
	var n int
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second),
		`SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE n.nspname = $1 AND c.relname IN ($2, $3)`, schema, table, table+"_token").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("found %d of the table and sequence under their exact names", n)
	}
	for _, l := range []locker.Lease{lease, l2} {
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgres_BadNames_Refused: names PostgreSQL would truncate or cannot
// hold are refused before any SQL is sent.
func TestPostgres_BadNames_Refused(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	pool := newPool(t, dsn)
	for i, opt := range []locker.Option{
		postgres.WithTable(strings.Repeat("t", 58)), // + "_token" would pass 63 bytes
		postgres.WithSchema(strings.Repeat("s", 64)),
		postgres.WithTable("a\x00b"),
		postgres.WithSchema("\xff"),
		postgres.WithTable(""),
		postgres.WithMaxConns(0),
	} {
		if l, err := postgres.New(pool, opt); !errors.Is(err, locker.ErrInvalidOption) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("New with bad option %d = %v, want ErrInvalidOption", i, err)
		}
	}
	for _, q := range []string{"table=" + strings.Repeat("t", 58), "schema=a%00b", "table=", "table=a&table=b",
		"max_conns=0", "max_conns=many", "skip_schema_creation=perhaps"} {
		u, _ := url.Parse(dsn)
		u.RawQuery = q
		if l, err := locker.Open(ctxT(t, 10*time.Second), u.String()); !errors.Is(err, locker.ErrInvalidURL) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("Open(…?%s) = %v, want ErrInvalidURL", q, err)
		}
	}
}
