package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
)

// A PostgresPair is a PostgreSQL 15 primary with one hot standby streaming
// from it asynchronously, private to the calling test, in one container
// (see launch.PostgresReplica; both share its clock), removed at
// t.Cleanup. Settings are the shared server's (fsync off). It fails over
// as often as a test likes: KillPrimary, Promote (the roles swap), and
// Rebuild (the killed server becomes the new primary's standby). Its
// methods are not safe for concurrent use.
type PostgresPair struct {
	srv   *Server // the container
	ports launch.PostgresReplicaPorts
	// The current roles' ports: the primary's, and the standby's (after
	// Promote and until Rebuild, the killed old primary's).
	primary, standby int
}

// PostgresWithReplica starts a PostgresPair and waits until the standby
// streams.
func PostgresWithReplica(t testing.TB) *PostgresPair {
	t.Helper()
	if _, err := docker(); err != nil {
		unavailable(t, "a PostgreSQL primary with a replica needs Docker (LOCKER_TEST_POSTGRES_DSN names a single server): %v", err)
	}
	p := &PostgresPair{}
	p.srv = Private(t, "postgres-replica", "LOCKER_TEST_POSTGRES_DSN", func(img Images, port int) launch.Spec {
		more, err := launch.FreePorts(1)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		p.ports = launch.PostgresReplicaPorts{Primary: port, Replica: more[0]}
		p.primary, p.standby = port, more[0]
		return launch.PostgresReplica(img.Server, p.ports, pgSettings...)
	})
	return p
}

// PrimaryDSN and ReplicaDSN are the libpq URLs of the current primary and
// of the standby (read-only; after Promote and until Rebuild, the killed
// old primary). They swap at Promote.
func (p *PostgresPair) PrimaryDSN() string { return launch.PostgresDSN(loopback(p.primary)) }
func (p *PostgresPair) ReplicaDSN() string { return launch.PostgresDSN(loopback(p.standby)) }

// BothDSN lists both servers with target_session_attrs=read-write: a
// client connects to whichever accepts writes, the primary before a
// failover and the promoted standby after it, failover after failover.
func (p *PostgresPair) BothDSN() string {
	return fmt.Sprintf("postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write",
		loopback(p.ports.Primary), loopback(p.ports.Replica))
}

// WaitReplayed waits, up to within, until the standby has replayed every
// change the primary has written so far.
func (p *PostgresPair) WaitReplayed(t testing.TB, within time.Duration) {
	t.Helper()
	var lsn string
	if err := poll(30*time.Second, func(ctx context.Context) error {
		return launch.PostgresQueryRow(ctx, loopback(p.primary), "SELECT pg_current_wal_lsn()::text", &lsn)
	}); err != nil {
		t.Fatalf("testenv: the primary's WAL position: %v", err)
	}
	err := poll(within, func(ctx context.Context) error {
		var done bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.standby),
			"SELECT coalesce(pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn, false)", &done); err != nil {
			return err
		}
		if !done {
			return fmt.Errorf("the standby has not replayed up to %s", lsn)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// CutReplication stops the standby streaming (primary_conninfo emptied
// and reloaded): from then on, nothing the primary writes reaches it — the
// un-replicated tail that an asynchronous standby may lose in a failover,
// made certain.
func (p *PostgresPair) CutReplication(t testing.TB) {
	t.Helper()
	err := poll(30*time.Second, func(ctx context.Context) error {
		return pgExec(ctx, p.ReplicaDSN(), "ALTER SYSTEM SET primary_conninfo = ''")
	})
	if err != nil {
		t.Fatalf("testenv: cut replication: %v", err)
	}
	err = poll(30*time.Second, func(ctx context.Context) error {
		var ok bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.standby), "SELECT pg_reload_conf()", &ok); err != nil {
			return err
		}
		var receivers int
		if err := launch.PostgresQueryRow(ctx, loopback(p.standby), "SELECT count(*) FROM pg_stat_wal_receiver", &receivers); err != nil {
			return err
		}
		if receivers > 0 {
			return fmt.Errorf("the standby still has a WAL receiver")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: cut replication: %v", err)
	}
}

// KillPrimary SIGKILLs the primary's postmaster and every process of it
// (launch.PostgresKillScript): its clients see their connections end,
// nothing more is written or sent to the standby.
func (p *PostgresPair) KillPrimary(t testing.TB) {
	t.Helper()
	p.srv.Exec(t, "sh", "-c", launch.PostgresKillScript(p.ports.Dir(p.primary)))
}

// Promote promotes the standby (pg_promote, waiting for the end of
// recovery) and returns once it accepts writes: it is the primary now,
// and the old primary (killed) the standby's place, until Rebuild.
func (p *PostgresPair) Promote(t testing.TB, within time.Duration) {
	t.Helper()
	err := poll(within, func(ctx context.Context) error {
		var inRecovery bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.standby), "SELECT pg_is_in_recovery()", &inRecovery); err != nil {
			return err
		}
		if !inRecovery {
			return nil
		}
		// pg_promote(wait, seconds): false if not promoted in that time.
		var promoted bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.standby), "SELECT pg_promote(false)", &promoted); err != nil {
			return err
		}
		return fmt.Errorf("the standby is still in recovery")
	})
	if err != nil {
		t.Fatalf("testenv: promote: %v", err)
	}
	p.primary, p.standby = p.standby, p.primary
}

// Rebuild makes the server killed in the last failover a standby of the
// current primary again (launch.PostgresStandbyScript: its data directory
// replaced by a fresh pg_basebackup of the primary) and returns once it
// streams, within; then the pair can fail over again, the other way. It
// fails if that server still runs.
func (p *PostgresPair) Rebuild(t testing.TB, within time.Duration) {
	t.Helper()
	start := time.Now()
	p.srv.Exec(t, "sh", "-c", launch.PostgresStandbyScript(p.ports.Dir(p.standby), p.primary))
	if err := poll(within, func(ctx context.Context) error {
		_, err := launch.PostgresStreaming(ctx, loopback(p.standby))
		return err
	}); err != nil {
		t.Fatalf("testenv: the rebuilt standby at %s: %v", loopback(p.standby), err)
	}
	t.Logf("testenv: standby at %s rebuilt from the primary at %s in %v", loopback(p.standby), loopback(p.primary), time.Since(start).Round(time.Millisecond))
}
