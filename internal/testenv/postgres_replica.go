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
// t.Cleanup. Settings are the shared server's (fsync off).
type PostgresPair struct {
	srv   *Server // the container
	ports launch.PostgresReplicaPorts
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
		return launch.PostgresReplica(img.Server, p.ports, pgSettings...)
	})
	return p
}

// PrimaryDSN and ReplicaDSN are the libpq URLs of the first primary and of
// the standby (read-only until Promote).
func (p *PostgresPair) PrimaryDSN() string { return launch.PostgresDSN(loopback(p.ports.Primary)) }
func (p *PostgresPair) ReplicaDSN() string { return launch.PostgresDSN(loopback(p.ports.Replica)) }

// BothDSN lists both servers with target_session_attrs=read-write: a
// client connects to whichever accepts writes, the primary before a
// failover and the promoted standby after it.
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
		return launch.PostgresQueryRow(ctx, loopback(p.ports.Primary), "SELECT pg_current_wal_lsn()::text", &lsn)
	}); err != nil {
		t.Fatalf("testenv: the primary's WAL position: %v", err)
	}
	err := poll(within, func(ctx context.Context) error {
		var done bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.ports.Replica),
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
		if err := launch.PostgresQueryRow(ctx, loopback(p.ports.Replica), "SELECT pg_reload_conf()", &ok); err != nil {
			return err
		}
		var receivers int
		if err := launch.PostgresQueryRow(ctx, loopback(p.ports.Replica), "SELECT count(*) FROM pg_stat_wal_receiver", &receivers); err != nil {
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
	p.srv.Exec(t, "sh", "-c", launch.PostgresKillScript(launch.PostgresPrimaryDir))
}

// Promote promotes the standby (pg_promote, waiting for the end of
// recovery) and returns once it accepts writes.
func (p *PostgresPair) Promote(t testing.TB, within time.Duration) {
	t.Helper()
	err := poll(within, func(ctx context.Context) error {
		var inRecovery bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.ports.Replica), "SELECT pg_is_in_recovery()", &inRecovery); err != nil {
			return err
		}
		if !inRecovery {
			return nil
		}
		// pg_promote(wait, seconds): false if not promoted in that time.
		var promoted bool
		if err := launch.PostgresQueryRow(ctx, loopback(p.ports.Replica), "SELECT pg_promote(false)", &promoted); err != nil {
			return err
		}
		return fmt.Errorf("the standby is still in recovery")
	})
	if err != nil {
		t.Fatalf("testenv: promote: %v", err)
	}
}
