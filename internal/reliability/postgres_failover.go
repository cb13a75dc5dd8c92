package reliability

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// PostgresFailover is a PostgreSQL 15 primary and a hot standby streaming
// from it asynchronously (testenv.PostgresWithReplica, one container, one
// clock); clients list both servers with target_session_attrs=read-write
// and follow the primary (no proxies). Its fault SIGKILLs the primary and
// promotes the standby, and heals by rebuilding the killed server as a
// standby of the new one (pg_basebackup), so that the next injection fails
// over the other way.
func PostgresFailover(t testing.TB) *Deployment {
	pair := testenv.PostgresWithReplica(t)
	const name = "primary killed, standby promoted"
	d := &Deployment{Name: "postgres-failover", TellingFault: name, TTL: time.Second, Permits: true, tb: t,
		// The heal (the rebuild) ends before the liveness check, so the
		// bound needs only a client's reconnection to the promoted server;
		// 20 s leaves room for a loaded machine.
		Liveness: 20 * time.Second,
		connect:  pgConnect(pair.BothDSN(), "rel_"+fresh())}
	d.Faults = []Fault{{Name: name,
		Outside: "replication is asynchronous: the promoted standby may lack a lock granted just before the failover " +
			"(tokens still rise, floored by the server clock, and the fence holds)",
		Inject: func(h *Harm) {
			h.Do(pair.KillPrimary)
			h.Undo(func(tb testing.TB) { pair.Rebuild(tb, 2*time.Minute) })
			h.Do(func(tb testing.TB) { pair.Promote(tb, time.Minute) })
		}}}
	return d
}

// pgConnect makes the clients of a PostgreSQL deployment: a pool of 8
// connections to dsn — to the slot's proxy instead of dsn's host when the
// deployment has slots — over table. Built without connecting, as the
// other backends' clients are: the first acquisition connects.
func pgConnect(dsn, table string) func(context.Context, []string) (locker.Locker, error) {
	return func(_ context.Context, addrs []string) (locker.Locker, error) {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, err
		}
		if len(addrs) > 0 {
			u.Host = addrs[0]
		}
		q := u.Query()
		q.Set("connect_timeout", "2")
		u.RawQuery = q.Encode()
		pc, err := pgxpool.ParseConfig(u.String())
		if err != nil {
			return nil, err
		}
		pc.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			return nil, err
		}
		l, err := postgres.New(pool, postgres.WithTable(table))
		if err != nil {
			pool.Close()
			return nil, err
		}
		return closing{l, pool.Close}, nil
	}
}
