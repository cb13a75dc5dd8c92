package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// TestOpen_DefaultBudget_QuarterOfServerConnections: a Locker opened from a
// URL with no budget holds a quarter of the connections the server allows
// ordinary roles (read at Open: more than pgx's own pool default and than
// the old fixed 16), and the next TryAcquire answers ErrUnavailable
// wrapping ErrPoolExhausted.
func TestOpen_DefaultBudget_QuarterOfServerConnections(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	want, err := postgres.DefaultBudget(ctxT(t, 10*time.Second), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var maxConns int
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SELECT current_setting('max_connections')::int").Scan(&maxConns); err != nil {
		t.Fatal(err)
	}
	if want <= 16 || want > maxConns/4 {
		t.Fatalf("default budget %d with max_connections %d: want more than 16, at most a quarter", want, maxConns)
	}
	l, err := locker.Open(ctxT(t, 10*time.Second), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i := range want {
		if _, err := l.TryAcquire(ctxT(t, 10*time.Second), fmt.Sprint("budget/", i)); err != nil {
			t.Fatalf("lock %d of the budget %d: %v", i+1, want, err)
		}
	}
	_, err = l.TryAcquire(ctxT(t, 10*time.Second), "budget/one-too-many")
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, postgres.ErrPoolExhausted) {
		t.Fatalf("TryAcquire beyond the budget %d = %v, want ErrUnavailable wrapping ErrPoolExhausted", want, err)
	}
}

// TestOpen_QueryParameters_AreTheOptions: every parameter of this package
// is the option of the same name (max_conns bounds the Locker), and the
// Locker-wide ttl applies.
func TestOpen_QueryParameters_AreTheOptions(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = "schema=params&table=t&max_conns=1&skip_schema_creation=false&ttl=7s"
	l, err := locker.Open(ctxT(t, 10*time.Second), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.TryAcquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := locker.GrantedTTL(lease); got != 7*time.Second {
		t.Fatalf("GrantedTTL = %v, want 7s", got)
	}
	if _, err := l.TryAcquire(ctxT(t, 10*time.Second), "k2"); !errors.Is(err, postgres.ErrPoolExhausted) {
		t.Fatalf("second lock with max_conns=1 = %v, want ErrPoolExhausted", err)
	}
	var n int
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM params.t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in params.t = %d, %v; want 1", n, err)
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// skip_schema_creation=true against a missing table: Open fails naming
	// it, nothing is created.
	u.RawQuery = "schema=params&table=missing&skip_schema_creation=true"
	_, err = locker.Open(ctxT(t, 10*time.Second), u.String())
	if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "missing (table)") {
		t.Fatalf("Open on a table never created = %v, want ErrInvalidOption naming it", err)
	}
}

// TestPostgres_WithLogger_ReachesTheWatcher: the logger of WithLogger gets
// the backend's background work: the watcher of a held lock logs the end
// of its session.
func TestPostgres_WithLogger_ReachesTheWatcher(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	h := &recorder{}
	l := newLocker(t, dsn, locker.WithLogger(slog.New(h)))
	lease, err := l.TryAcquire(ctxT(t, 10*time.Second), randomKey("log"), locker.WithOwner("logged"))
	if err != nil {
		t.Fatal(err)
	}
	admin := adminConn(t, dsn)
	if _, err := admin.Exec(ctxT(t, 10*time.Second), "SELECT pg_terminate_backend($1)", holderPID(t, admin, "logged")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done not closed after the session was terminated")
	}
	if !h.has("postgres: the session holding a lock ended") {
		t.Fatalf("logged %q, want the watcher's record", h.messages())
	}
}

// recorder is a slog.Handler that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func (r *recorder) has(prefix string) bool {
	for _, m := range r.messages() {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
