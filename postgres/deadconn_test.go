package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// The server ends the pool's idle connections (an administrator's
// pg_terminate_backend here; a failover, a restart, a pooler or
// idle_session_timeout do the same) and the next Acquire is made at once,
// before the pool would ping a connection idle for over a second. A
// connection that died holds nothing, so Acquire and TryAcquire take
// another one instead of failing with ErrUnavailable (found by the
// failover test of issue 20, where every first Acquire after the
// failover failed so).
func TestIdleConnectionsEndedByServer_NextAcquireSucceeds(t *testing.T) {
	for _, m := range []postgres.Mode{postgres.ForUpdate, postgres.Advisory} {
		t.Run(m.String(), func(t *testing.T) {
			dsn := testenv.PostgresDB(t)
			l := newLocker(t, dsn, postgres.WithMode(m))
			admin := adminConn(t, dsn)
			ctx := ctxT(t, time.Minute)
			for round := range 3 {
				// Several connections, each just used and now idle.
				var wg sync.WaitGroup
				for i := range 6 {
					wg.Go(func() {
						k := randomKey("deadconn")
						lease, err := l.Acquire(ctx, k)
						if err != nil {
							t.Errorf("round %d: warm-up Acquire %d: %v", round, i, err)
							return
						}
						time.Sleep(20 * time.Millisecond)
						_ = lease.Release(ctx)
					})
				}
				wg.Wait()
				var ended int
				if err := admin.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend') s`).Scan(&ended); err != nil {
					t.Fatal(err)
				}
				if ended == 0 {
					t.Fatalf("round %d: the server ended no connection of the Locker's pool", round)
				}
				lease, err := l.Acquire(ctx, randomKey("deadconn"))
				if err != nil {
					t.Fatalf("round %d: Acquire just after the server ended %d idle connections: %v", round, ended, err)
				}
				_ = lease.Release(ctx)
				if _, err := l.TryAcquire(ctx, randomKey("deadconn")); err != nil {
					t.Fatalf("round %d: TryAcquire after the server ended %d idle connections: %v", round, ended, err)
				}
			}
		})
	}
}
