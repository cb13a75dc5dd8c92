package testenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Main runs the tests of a backend package and then removes the servers they
// shared. Use it as TestMain(m) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	removeShared()
	os.Exit(code)
}

// Redis returns the shared redis-server 7.0, run without persistence
// (--save ” --appendonly no) so that Kill+Restart loses its data, as a real
// cache-mode Redis would. Tests isolate themselves by key prefix.
func Redis(t testing.TB) *Server {
	t.Helper()
	return single(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img images, port int) spec {
		return redisSpec(img, port)
	})
}

func redisSpec(img images, port int, extra ...string) spec {
	return spec{
		kind:       "redis",
		image:      img.server,
		entrypoint: []string{"redis-server"},
		cmd: append([]string{"--port", strconv.Itoa(port), "--bind", "0.0.0.0", "--protected-mode", "no",
			"--save", "", "--appendonly", "no"}, extra...),
		port:  port,
		probe: redisPing,
	}
}

// Etcd returns the shared etcd 3.6 single-member cluster. Tests isolate
// themselves by key prefix.
func Etcd(t testing.TB) *Server {
	t.Helper()
	return single(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img images, port int) spec {
		return etcdSpec(img.etcd, nil, port, "e1", "e1=http://127.0.0.1:2380", "http://127.0.0.1:2380", "locker-"+randomID(4))
	})
}

// Etcd34 returns a shared etcd 3.4.23 (Debian's) single member, for checking
// that clients still work against the oldest server users may run.
func Etcd34(t testing.TB) *Server {
	t.Helper()
	return single(t, "etcd34", "LOCKER_TEST_ETCD34_ENDPOINTS", func(img images, port int) spec {
		sp := etcdSpec(img.server, []string{"etcd", "--logger", "zap"}, port, "e1", "e1=http://127.0.0.1:2380", "http://127.0.0.1:2380", "locker-"+randomID(4))
		sp.kind = "etcd34"
		return sp
	})
}

// etcdSpec runs member name of cluster initial; entrypoint nil means the
// image's own.
func etcdSpec(image string, entrypoint []string, port int, name, initial, peerURL, token string) spec {
	sp := spec{kind: "etcd", image: image, entrypoint: entrypoint, port: port, probe: etcdHealth}
	client := "http://127.0.0.1:" + strconv.Itoa(port)
	sp.cmd = []string{
		"--name", name, "--data-dir", "/data",
		"--listen-client-urls", "http://0.0.0.0:" + strconv.Itoa(port),
		// What the server tells clients (the member list the client
		// balances over): the address the test process dials.
		"--advertise-client-urls", client,
		"--listen-peer-urls", "http://0.0.0.0:2380",
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", initial,
		// The same for every member of one cluster, unique across clusters:
		// members of different tests' clusters must never merge.
		"--initial-cluster-token", token,
		"--log-level", "warn",
	}
	return sp
}

// zkConfig is ZooKeeper's configuration. tickTime=200 lets tests use short
// sessions; the session limits are set explicitly because the defaults
// (2 and 20 ticks) would cap sessions at 4 s.
const zkConfig = `tickTime=200
initLimit=20
syncLimit=10
dataDir=/data
clientPort=%d
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=400
maxSessionTimeout=60000
quorumListenOnAllIPs=true
`

// zkSpec runs ZooKeeper 3.8 with myid id; servers are the server.N lines of
// an ensemble, empty for a standalone server.
func zkSpec(img images, port, id int, servers string) spec {
	return zkSpecWith(img, port, id, servers, "", "")
}

// zkSpecWith is zkSpec with more shell lines run before the server starts
// (setup) and more JVM flags (flags).
func zkSpecWith(img images, port, id int, servers, setup, flags string) spec {
	script := fmt.Sprintf(`set -e
mkdir -p /data
echo %d >/data/myid
%s
cat >/tmp/zoo.cfg <<'EOF'
%s%sEOF
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dzookeeper.log.dir=/tmp %s \
	-cp '/usr/share/java/*:/etc/zookeeper/conf' org.apache.zookeeper.server.quorum.QuorumPeerMain /tmp/zoo.cfg
`, id, setup, fmt.Sprintf(zkConfig, port), servers, flags)
	return spec{
		kind:       "zookeeper",
		image:      img.server,
		entrypoint: []string{"sh", "-c", script},
		port:       port,
		probe:      zkServing,
	}
}

// ZooKeeper returns the shared ZooKeeper 3.8 standalone server (tickTime=200,
// minSessionTimeout=400, maxSessionTimeout=60000). Tests isolate themselves
// by chroot path.
func ZooKeeper(t testing.TB) *Server {
	t.Helper()
	return single(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img images, port int) spec {
		return zkSpec(img, port, 1, "")
	})
}

// ZooKeeperFromLog returns a standalone ZooKeeper 3.8 server private to the
// calling test (removed at its t.Cleanup), started over a data directory
// that holds txnLog as its only transaction log (version-2/log.1) and no
// snapshot: for states no client reaches in seconds, such as a node whose
// child version (the counter of sequential names) is near 2^31. txnLog is in
// ZooKeeper's on-disk format, its first zxid 1.
func ZooKeeperFromLog(t testing.TB, txnLog []byte) *Server {
	t.Helper()
	cli := needDocker(t, "LOCKER_TEST_ZOOKEEPER_ADDR")
	server, etcd := findImagesOnce(t)
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	setup := "mkdir -p /data/version-2\necho " + base64.StdEncoding.EncodeToString(txnLog) + " | base64 -d >/data/version-2/log.1"
	// Without a snapshot, the server refuses to replay a log unless told
	// to trust the empty snapshot.
	sp := zkSpecWith(images{server, etcd}, port, 1, "", setup, "-Dzookeeper.snapshot.trust.empty=true")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	s, err := startServer(ctx, cli, sp)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(s.remove)
	t.Logf("testenv: zookeeper from a transaction log started in %v at %s", time.Since(start).Round(time.Millisecond), s.Addr())
	return s
}

// pgScript initialises a cluster on first start only, so that a restarted
// server keeps its data. initdb's trust applies to local connections only,
// and ours come from the bridge gateway, hence the host line. fsync is off:
// the faults the tests inject kill the server's processes, never the kernel,
// so what PostgreSQL wrote survives them in the page cache either way; with
// fsync on, every commit waits on the engine's storage driver (here
// fuse-overlayfs), and a process stuck there cannot be frozen by docker
// pause ("unable to freeze").
const pgScript = `set -e
D=/var/lib/locker/pg
run() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s $D/PG_VERSION ]; then
	mkdir -p $D
	chown postgres:postgres $D
	run initdb -D $D -A trust -U postgres --no-sync >/tmp/initdb.log
	echo 'host all all 0.0.0.0/0 trust' >>$D/pg_hba.conf
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D $D -p %d \
	-c listen_addresses='*' -c unix_socket_directories=/tmp -c max_connections=200 -c fsync=off
`

// Postgres returns the shared PostgreSQL 15 server, trust authentication,
// user postgres. Tests isolate themselves by database (see PostgresDB) or
// table name.
func Postgres(t testing.TB) *Server {
	t.Helper()
	return single(t, "postgres", "LOCKER_TEST_POSTGRES_DSN", func(img images, port int) spec {
		return spec{
			kind:       "postgres",
			image:      img.server,
			entrypoint: []string{"sh", "-c", fmt.Sprintf(pgScript, port)},
			port:       port,
			probe:      pgPing,
		}
	})
}

// PostgresDB creates a database of its own for the calling test on the
// shared PostgreSQL server, drops it at t.Cleanup, and returns its DSN.
func PostgresDB(t testing.TB) string {
	t.Helper()
	base := Postgres(t).DSN()
	name := "t_" + randomID(6)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgExec(ctx, base, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE: a test that failed may have left connections open.
		if err := pgExec(ctx, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("testenv: DSN %q: %v", base, err)
	}
	u.Path = "/" + name
	return u.String()
}

func pgExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// images holds the tags of the two test images.
type images struct{ server, etcd string }

// sharedEntry is one lazily started shared server. A failed start is
// remembered: every later test fails at once instead of waiting again.
type sharedEntry struct {
	mu    sync.Mutex
	s     *Server
	err   error
	tried bool
}

var (
	sharedMu sync.Mutex
	shared   = map[string]*sharedEntry{}
)

// single returns the shared server of this kind: the external one envVar
// names, or a container started on first use.
func single(t testing.TB, kind, envVar string, mk func(images, int) spec) *Server {
	t.Helper()
	if v := os.Getenv(envVar); v != "" {
		return external(t, kind, envVar, v)
	}
	cli := needDocker(t, envVar)
	server, etcd := findImagesOnce(t)
	sharedMu.Lock()
	e := shared[kind]
	if e == nil {
		e = &sharedEntry{}
		shared[kind] = e
	}
	sharedMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.tried {
		e.tried = true
		port, err := freePort()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			start := time.Now()
			e.s, e.err = startServer(ctx, cli, mk(images{server, etcd}, port))
			cancel()
			if e.err == nil {
				t.Logf("testenv: %s started in %v at %s", kind, time.Since(start).Round(time.Millisecond), e.s.Addr())
			}
		} else {
			e.err = err
		}
	}
	if e.err != nil {
		t.Fatalf("testenv: %v", e.err)
	}
	return e.s
}

// removeShared removes the shared servers; Main calls it after the tests.
func removeShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	var wg sync.WaitGroup
	for kind, e := range shared {
		e.mu.Lock()
		if e.s != nil {
			wg.Add(1)
			go func(s *Server) {
				defer wg.Done()
				s.remove()
			}(e.s)
		}
		e.s, e.err, e.tried = nil, nil, false
		e.mu.Unlock()
		delete(shared, kind)
	}
	wg.Wait()
}

// external describes a server named by an environment variable.
func external(t testing.TB, kind, envVar, value string) *Server {
	t.Helper()
	s := &Server{kind: kind, envVar: envVar}
	switch kind {
	case "postgres":
		u, err := url.Parse(value)
		if err != nil || u.Host == "" {
			t.Fatalf("testenv: %s=%q is not a postgres:// URL with a host", envVar, value)
		}
		s.dsn = value
		s.addr = u.Host
		if u.Port() == "" {
			s.addr = u.Host + ":5432"
		}
	case "etcd", "etcd34":
		s.addr = strings.TrimSpace(strings.Split(value, ",")[0])
		s.addr = strings.TrimPrefix(strings.TrimPrefix(s.addr, "http://"), "https://")
	default:
		s.addr = value
	}
	return s
}
