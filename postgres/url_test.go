package postgres_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

func mustPoolConfig(t testing.TB, dsn string) *pgxpool.Config {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestOpen_BothSchemes_TableAndSchemaParameters: postgres:// and
// postgresql:// open the same backend; table= and schema= choose the
// objects (created on first use) and are not passed on to pgx, which would
// send them to the server as run-time parameters and fail.
func TestOpen_BothSchemes_TableAndSchemaParameters(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("table", "jobs_locks")
	q.Set("schema", "app")
	q.Set("ttl", "30s")
	u.RawQuery = q.Encode()
	var leases []locker.Lease
	for _, scheme := range []string{"postgres", "postgresql"} {
		u.Scheme = scheme
		l, err := locker.Open(ctxT(t, 10*time.Second), u.String())
		if err != nil {
			t.Fatalf("Open(%s://…): %v", scheme, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		lease, err := l.TryAcquire(ctxT(t, 10*time.Second), "job-"+scheme)
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", scheme, err)
		}
		leases = append(leases, lease)
	}
	var rows int
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM app.jobs_locks").Scan(&rows); err != nil {
		t.Fatalf("the table named by the URL: %v", err)
	}
	if rows != 2 {
		t.Fatalf("%d rows in app.jobs_locks, want 2", rows)
	}
	for _, l := range leases {
		if err := l.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpen_MalformedOrUnreachable: a URL pgx cannot parse is ErrInvalidURL
// naming the problem (without the password); a server that cannot be
// reached is ErrUnavailable at Open.
func TestOpen_MalformedOrUnreachable(t *testing.T) {
	_, err := locker.Open(ctxT(t, 10*time.Second), "postgres://u:secret@127.0.0.1:5432/db?pool_max_conns=many")
	if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), "pool_max_conns") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open with pool_max_conns=many = %v, want ErrInvalidURL naming pool_max_conns without the password", err)
	}
	_, err = locker.Open(ctxT(t, 10*time.Second), "postgres://u@127.0.0.1:1/db?connect_timeout=5")
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Open of a closed port = %v, want ErrUnavailable", err)
	}
}

// TestOpen_UnknownParameter_InvalidURL: a query parameter that is neither
// this package's, locker's, libpq's nor pgx's goes to the server as a
// run-time setting, which refuses it at Open: ErrInvalidURL naming it.
func TestOpen_UnknownParameter_InvalidURL(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = "tabel=locks"
	l, err := locker.Open(ctxT(t, 10*time.Second), u.String())
	if err == nil {
		_ = l.Close()
	}
	if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), "tabel") {
		t.Fatalf("Open with tabel=locks = %v, want ErrInvalidURL naming tabel", err)
	}
}
