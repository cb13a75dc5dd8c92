package testenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
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
	return single(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img Images, port int) launch.Spec {
		return launch.Redis(img.Server, port)
	})
}

// Etcd returns the shared etcd 3.6 single-member cluster. Tests isolate
// themselves by key prefix.
func Etcd(t testing.TB) *Server {
	t.Helper()
	return single(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img Images, port int) launch.Spec {
		return launch.EtcdSingle(img.Etcd, nil, port)
	})
}

// Etcd34 returns a shared etcd 3.4.23 (Debian's) single member, for checking
// that clients still work against the oldest server users may run.
func Etcd34(t testing.TB) *Server {
	t.Helper()
	return single(t, "etcd34", "LOCKER_TEST_ETCD34_ENDPOINTS", func(img Images, port int) launch.Spec {
		sp := launch.EtcdSingle(img.Server, []string{"etcd", "--logger", "zap"}, port)
		sp.Kind = "etcd34"
		return sp
	})
}

// zkJVM are the JVM flags of the tests' ZooKeeper servers: the client
// compiler only, which starts a server in about half the time; a benchmark
// run leaves it out, for the peak speed of the optimising compiler.
const zkJVM = "-XX:TieredStopAtLevel=1"

// zkSpec runs ZooKeeper 3.8 with myid id; servers are the server.N lines of
// an ensemble, empty for a standalone server.
func zkSpec(img Images, port, id int, servers string) launch.Spec {
	return launch.ZooKeeper(img.Server, port, launch.ZooKeeperOptions{ID: id, Servers: servers, JVM: zkJVM})
}

// ZooKeeper returns the shared ZooKeeper 3.8 standalone server (tickTime=200,
// minSessionTimeout=400, maxSessionTimeout=60000). Tests isolate themselves
// by chroot path.
func ZooKeeper(t testing.TB) *Server {
	t.Helper()
	return single(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
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
	return Private(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
		return launch.ZooKeeper(img.Server, port, launch.ZooKeeperOptions{
			Setup: "mkdir -p /data/version-2\necho " + base64.StdEncoding.EncodeToString(txnLog) + " | base64 -d >/data/version-2/log.1",
			// Without a snapshot, the server refuses to replay a log unless
			// told to trust the empty snapshot.
			JVM: zkJVM + " -Dzookeeper.snapshot.trust.empty=true",
		})
	})
}

// Images are the tags of the test images (scripts/test-Images).
type Images struct {
	Server string // Debian with redis-server, postgresql-15, zookeeper, etcd 3.4
	Etcd   string // etcd 3.6, FROM scratch
}

// Private starts a server of its own for the calling test, from the spec
// mk makes for a free port, waits until it answers its probe, and removes
// it at t.Cleanup: for servers configured unlike the shared ones (TLS,
// authentication, a prepared data directory). envVar is the variable whose
// absence outside CI lets the test skip when there is no Docker.
func Private(t testing.TB, kind, envVar string, mk func(img Images, port int) launch.Spec) *Server {
	t.Helper()
	d := needDocker(t, envVar)
	server, etcd := findImagesOnce(t)
	port, err := launch.FreePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	s, err := startServer(ctx, d, mk(Images{Server: server, Etcd: etcd}, port), false)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(s.remove)
	t.Logf("testenv: private %s started in %v at %s", kind, time.Since(start).Round(time.Millisecond), s.Addr())
	return s
}

// pgSettings are the tests' PostgreSQL settings. fsync is off: the faults
// the tests inject kill the server's processes, never the kernel, so what
// PostgreSQL wrote survives them in the page cache either way; with fsync
// on, every commit waits on the engine's storage driver (here
// fuse-overlayfs), and a process stuck there cannot be frozen by docker
// pause ("unable to freeze").
var pgSettings = []string{"max_connections=200", "fsync=off"}

// Postgres returns the shared PostgreSQL 15 server, trust authentication,
// user postgres. Tests isolate themselves by database (see PostgresDB) or
// table name.
func Postgres(t testing.TB) *Server {
	t.Helper()
	return single(t, "postgres", "LOCKER_TEST_POSTGRES_DSN", func(img Images, port int) launch.Spec {
		return launch.Postgres(img.Server, port, pgSettings...)
	})
}

// PostgresDB creates a database of its own for the calling test on the
// shared PostgreSQL server, drops it at t.Cleanup, and returns its DSN.
func PostgresDB(t testing.TB) string {
	t.Helper()
	base := Postgres(t).DSN()
	name := "t_" + launch.RandomID(6)
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
func single(t testing.TB, kind, envVar string, mk func(Images, int) launch.Spec) *Server {
	t.Helper()
	if v := os.Getenv(envVar); v != "" {
		return external(t, kind, envVar, v)
	}
	d := needDocker(t, envVar)
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
		port, err := launch.FreePort()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			start := time.Now()
			e.s, e.err = startServer(ctx, d, mk(Images{Server: server, Etcd: etcd}, port), false)
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
