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

// Dir is the data directory of the server on port: PostgresPrimaryDir for
// the first primary's, PostgresReplicaDir for the first standby's, whatever
// their roles are since.
func (p PostgresReplicaPorts) Dir(port int) string {
	if port == p.Primary {
		return PostgresPrimaryDir
	}
	return PostgresReplicaDir
}

// pgReplicaLib defines the shell functions of a PostgresReplica
// deployment's scripts. serve DIR PORT FLAGS… runs the server of DIR each
// time DIR.start appears (and removes it), forever: a server killed in a
// failover leaves its loop waiting, and standby DIR FROMPORT — a fresh
// clone in DIR of the server at FROMPORT (pg_basebackup -R: a standby
// streaming from it, through a replication slot "replica" made there;
// a slot of that name left by an earlier failed clone is dropped first) —
// starts it again. The standby reaches its primary at 127.0.0.1, whose
// local replication connections initdb -A trust allows. Asynchronous
// replication, PostgreSQL's default.
const pgReplicaLib = `set -e
run() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
serve() {
	local dir=$1 port=$2
	shift 2
	while :; do
		while [ ! -e $dir.start ]; do sleep 0.1; done
		rm $dir.start
		run postgres -D $dir -p $port -c listen_addresses='*' -c unix_socket_directories=/tmp "$@" || :
	done
}
standby() {
	if [ -s $1/postmaster.pid ] && kill -0 $(head -1 $1/postmaster.pid) 2>/dev/null; then
		echo "a server still runs in $1" >&2
		exit 1
	fi
	rm -rf $1
	mkdir -p $1
	chown postgres:postgres $1
	chmod 700 $1
	run psql -h 127.0.0.1 -p $2 -U postgres -qAt -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'replica'" >/dev/null
	run pg_basebackup -h 127.0.0.1 -p $2 -U postgres -D $1 -R -X stream -C -S replica --no-sync
	touch $1.start
}
`

// pgReplicaScript starts a primary, clones it as a standby and starts the
// clone; each server runs in a serve loop (see pgReplicaLib).
const pgReplicaScript = pgReplicaLib + `P=` + PostgresPrimaryDir + ` R=` + PostgresReplicaDir + `
mkdir -p $P
chown postgres:postgres $P
run initdb -D $P -A trust -U postgres --no-sync >/tmp/initdb.log
echo 'host all all 0.0.0.0/0 trust' >>$P/pg_hba.conf
touch $P.start
serve $P %[1]d %[3]s &
until run pg_isready -q -h 127.0.0.1 -p %[1]d; do sleep 0.1; done
standby $R %[1]d
serve $R %[2]d %[3]s &
wait
`

// PostgresReplica runs a PostgreSQL 15 primary and one hot standby
// streaming from it asynchronously, in one container (they share its
// clock); settings are more "name=value" server settings of both (-c).
// The replica answers its probe once it streams. After a failover, the
// killed server's data directory can be made a standby of the new primary
// again (PostgresStandbyScript), and the roles swap at each failover.
func PostgresReplica(image string, p PostgresReplicaPorts, settings ...string) Spec {
	return Spec{
		Kind:       "postgres-replica",
		Image:      image,
		Entrypoint: []string{"sh", "-c", fmt.Sprintf(pgReplicaScript, p.Primary, p.Replica, pgFlags(settings))},
		Data:       []string{PostgresData},
		Services: []Service{
			{"postgres", p.Primary, PostgresPing},
			{"postgres-standby", p.Replica, PostgresStreaming},
		},
	}
}

// PostgresStandbyScript, run in a PostgresReplica container, replaces the
// data directory dir of a server that no longer runs (killed in a
// failover) by a fresh clone of the primary at primaryPort, and starts it
// as a standby streaming from that primary. It fails if a server still
// runs in dir.
func PostgresStandbyScript(dir string, primaryPort int) string {
	return pgReplicaLib + fmt.Sprintf("standby %s %d\n", shellQuote(dir), primaryPort)
}

// PostgresStreaming is the probe of a standby: it answers, and its WAL
// receiver streams from its primary.
func PostgresStreaming(ctx context.Context, addr string) (string, error) {
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
