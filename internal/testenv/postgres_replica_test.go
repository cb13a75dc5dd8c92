package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker/internal/testenv"
)

// Two failovers in a row on one PostgresPair, each healed by Rebuild: the
// writes replayed before a failover are on the new primary, the roles
// swap, and the rebuilt standby replays what the new primary writes.
func TestPostgresPair_FailsOverAgainAfterRebuild(t *testing.T) {
	t.Parallel()
	p := testenv.PostgresWithReplica(t)
	exec := func(dsn, sql string, dest ...any) {
		t.Helper()
		ctx := ctxT(t, 30*time.Second)
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if len(dest) == 0 {
			_, err = c.Exec(ctx, sql)
		} else {
			err = c.QueryRow(ctx, sql).Scan(dest...)
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(dsn string) (n int) { t.Helper(); exec(dsn, "SELECT count(*) FROM smoke", &n); return n }
	exec(p.BothDSN(), "CREATE TABLE smoke (n int)")
	rows := 0
	for i := range 2 {
		exec(p.BothDSN(), "INSERT INTO smoke VALUES (1)")
		rows++
		p.WaitReplayed(t, time.Minute)
		old, standby := p.PrimaryDSN(), p.ReplicaDSN()

		start := time.Now()
		p.KillPrimary(t)
		p.Promote(t, time.Minute)
		promoted := time.Since(start)
		if p.PrimaryDSN() != standby || p.ReplicaDSN() != old {
			t.Fatalf("failover %d: the roles did not swap: primary %s, standby %s", i+1, p.PrimaryDSN(), p.ReplicaDSN())
		}
		if n := count(p.BothDSN()); n != rows {
			t.Fatalf("failover %d: %d rows on the new primary, want %d", i+1, n, rows)
		}
		exec(p.BothDSN(), "INSERT INTO smoke VALUES (1)")
		rows++

		p.Rebuild(t, time.Minute)
		t.Logf("failover %d: promoted %v after the kill, standby rebuilt %v after it", i+1, promoted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		var inRecovery bool
		exec(p.ReplicaDSN(), "SELECT pg_is_in_recovery()", &inRecovery)
		if !inRecovery {
			t.Fatalf("failover %d: the rebuilt server is not a standby", i+1)
		}
		exec(p.BothDSN(), "INSERT INTO smoke VALUES (1)")
		rows++
		p.WaitReplayed(t, time.Minute)
		if n := count(p.ReplicaDSN()); n != rows {
			t.Fatalf("failover %d: %d rows on the rebuilt standby, want %d", i+1, n, rows)
		}
	}
}
