package launch

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Data directories of a PostgresReplica deployment.
const (
	PostgresPrimaryDir = "/var/lib/locker/primary"
	PostgresReplicaDir = "/var/lib/locker/replica"
)

// PostgresReplicaPorts are the ports of a PostgresReplica deployment.
type PostgresReplicaPorts struct{ Primary, Replica int }

// pgReplicaScript starts a primary, clones it with pg_basebackup (-R: the
// clone is a standby streaming from the primary, with a replication slot
// of its own) and starts the clone as a hot standby; asynchronous
// replication, PostgreSQL's default. The replica reaches the primary at
// 127.0.0.1, whose local replication connections initdb -A trust allows.
const pgReplicaScript = `set -e
P=` + PostgresPrimaryDir + ` R=` + PostgresReplicaDir + `
run() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p $P $R
chown postgres:postgres $P $R
chmod 700 $R
run initdb -D $P -A trust -U postgres --no-sync >/tmp/initdb.log
echo 'host all all 0.0.0.0/0 trust' >>$P/pg_hba.conf
run postgres -D $P -p %[1]d -c listen_addresses='*' -c unix_socket_directories=/tmp %[3]s &
until run pg_isready -q -h 127.0.0.1 -p %[1]d; do sleep 0.1; done
run pg_basebackup -h 127.0.0.1 -p %[1]d -U postgres -D $R -R -X stream -C -S replica --no-sync
run postgres -D $R -p %[2]d -c listen_addresses='*' -c unix_socket_directories=/tmp %[3]s &
wait
`

// PostgresReplica runs a PostgreSQL 15 primary and one hot standby
// streaming from it asynchronously, in one container (they share its
// clock); settings are more "name=value" server settings of both (-c).
// The replica answers its probe once it streams.
func PostgresReplica(image string, p PostgresReplicaPorts, settings ...string) Spec {
	return Spec{
		Kind:       "postgres-replica",
		Image:      image,
		Entrypoint: []string{"sh", "-c", fmt.Sprintf(pgReplicaScript, p.Primary, p.Replica, pgFlags(settings))},
		Services: []Service{
			{"postgres", p.Primary, PostgresPing},
			{"postgres-standby", p.Replica, func(ctx context.Context, addr string) (string, error) {
				v, err := PostgresPing(ctx, addr)
				if err != nil {
					return "", err
				}
				var status string
				err = PostgresQueryRow(ctx, addr, "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')", &status)
				if err == nil && status != "streaming" {
					err = fmt.Errorf("standby not streaming: wal receiver %s", status)
				}
				return v, err
			}},
		},
	}
}

// pgFlags are postgres's -c flags for settings, quoted for the shell.
func pgFlags(settings []string) string {
	var c strings.Builder
	for _, s := range settings {
		c.WriteString(" -c " + shellQuote(s))
	}
	return c.String()
}

// PostgresKillScript SIGKILLs the postmaster whose data directory is dir
// and every process it started, as a crash of its host would: the
// postmaster is stopped first, so that it cannot react to its children's
// deaths.
func PostgresKillScript(dir string) string {
	return "P=$(head -1 " + dir + "/postmaster.pid) && kill -STOP $P && pkill -KILL -P $P; kill -KILL $P"
}

// PostgresQueryRow runs sql (no arguments) on the server at addr, as
// postgres, and scans its one row into dest.
func PostgresQueryRow(ctx context.Context, addr, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, PostgresDSN(addr))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}
