package testenv_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testenv"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The smoke tests wait on Docker and on servers starting, hardly on the
	// CPU: unless -parallel was given, run them all at once rather than
	// GOMAXPROCS at a time.
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == strconv.Itoa(runtime.GOMAXPROCS(0)) {
		flag.Set("test.parallel", "10")
	}
	testenv.Main(m)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func redisClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// ping reports whether one PING to addr succeeds within d.
func ping(t *testing.T, c *redis.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

// eventually retries f for up to d: a server that just came back may refuse
// the first attempts of a client that still holds a dead connection.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRedis_PauseKillRestart(t *testing.T) {
	t.Parallel() // the only test of this package using the shared Redis
	s := testenv.Redis(t)
	c := redisClient(t, s.Addr())
	if err := c.Set(ctxT(t, 5*time.Second), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Pause, Unpause, Kill and Restart each twice: the nemesis tries a
	// control again after it reported an error, which it may have done all
	// the same (as Disconnect did in a CI run); done twice, they do it once.
	s.Pause(t)
	s.Pause(t)
	if err := ping(t, c, 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("PING to a paused server: %v, want a timeout", err)
	}
	s.Unpause(t)
	s.Unpause(t)
	eventually(t, 5*time.Second, func() error { return ping(t, c, time.Second) })

	addr := s.Addr()
	s.Kill(t)
	s.Kill(t)
	if err := ping(t, c, time.Second); err == nil {
		t.Fatal("PING to a killed server succeeded")
	}
	s.Restart(t)
	s.Restart(t)
	if s.Addr() != addr {
		t.Logf("address changed over restart: %s -> %s", addr, s.Addr())
	}
	c2 := redisClient(t, s.Addr())
	eventually(t, 5*time.Second, func() error { return ping(t, c2, time.Second) })
	// No persistence: the restart lost the key, which is what Redis
	// fencing tests rely on.
	if err := c2.Get(ctxT(t, 5*time.Second), "k").Err(); err != redis.Nil {
		t.Fatalf("GET after restart: %v, want redis.Nil", err)
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxy_BlackholeResetLatencyHeal(t *testing.T) {
	t.Parallel()
	s := testenv.RedisMasters(t, 1).Nodes[0]
	p := s.Proxy(t)
	c := redisClient(t, p.Addr())
	if err := ping(t, c, 2*time.Second); err != nil {
		t.Fatal(err)
	}

	p.Blackhole(t)
	if err := ping(t, c, 500*time.Millisecond); err == nil || !(errors.Is(err, context.DeadlineExceeded) || isTimeout(err)) {
		t.Fatalf("PING through a blackhole: %v, want a timeout", err)
	}
	p.Heal(t)
	eventually(t, 5*time.Second, func() error { return ping(t, c, time.Second) })

	p.ResetPeer(t)
	if err := ping(t, c, 2*time.Second); err == nil {
		t.Fatal("PING through reset_peer succeeded")
	}
	p.Heal(t)
	eventually(t, 5*time.Second, func() error { return ping(t, c, time.Second) })

	p.Latency(t, 300*time.Millisecond)
	start := time.Now()
	if err := ping(t, c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("PING with 300ms latency took %v", d)
	}
	p.Heal(t)
}

// Retarget moves a proxy to another server on the same address: a client
// of the proxy reconnects and reaches the new server's data.
func TestProxy_RetargetFollowsAServerToItsNewAddress(t *testing.T) {
	t.Parallel()
	c := testenv.RedisMasters(t, 2)
	p := c.Nodes[0].Proxy(t)
	addr := p.Addr()
	// Retarget listens again on the port it closed: an ephemeral port could
	// be taken meanwhile by any outgoing connection.
	_, ps, _ := net.SplitHostPort(addr)
	if port, _ := strconv.Atoi(ps); port < launch.PortLow || port >= launch.PortHigh {
		t.Errorf("proxy on %s, want a port in [%d, %d), below the ephemeral range", addr, launch.PortLow, launch.PortHigh)
	}
	for i, s := range c.Nodes {
		if err := redisClient(t, s.Addr()).Set(t.Context(), "who", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cl := redisClient(t, addr)
	get := func() (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return cl.Get(ctx, "who").Result()
	}
	if v, err := get(); err != nil || v != "0" {
		t.Fatalf("GET through the proxy before Retarget = %q, %v; want the first server's 0", v, err)
	}
	p.Retarget(t, c.Nodes[1].Addr())
	if p.Addr() != addr {
		t.Fatalf("Retarget moved the proxy from %s to %s", addr, p.Addr())
	}
	eventually(t, 5*time.Second, func() error {
		if v, err := get(); err != nil || v != "1" {
			return fmt.Errorf("GET through the retargeted proxy = %q, %v; want the second server's 1", v, err)
		}
		return nil
	})
}

func TestRedisMasters(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisMasters(t, 3)
	if len(cl.Addrs()) != 3 {
		t.Fatalf("addrs %v", cl.Addrs())
	}
	for _, a := range cl.Addrs() {
		if err := ping(t, redisClient(t, a), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()[:1]})
	defer c.Close()
	ctx := ctxT(t, 30*time.Second)
	// Keys spread over all slots, so the client must follow MOVED to every
	// member through the announced addresses.
	for i := range 50 {
		if err := c.Set(ctx, fmt.Sprintf("key%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if v, err := c.Get(ctx, fmt.Sprintf("key%d", i)).Int(); err != nil || v != i {
			t.Fatalf("key%d = %v, %v", i, v, err)
		}
	}
	// A stopped member leaves the others answering. The bound is for a new
	// connection on a loaded machine: a loaded fresh-clone run (2026-12-03,
	// the cluster 42 s to start) saw one second pass without an answer.
	cl.Nodes[2].Pause(t)
	if err := ping(t, redisClient(t, cl.Nodes[0].Addr()), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cl.Nodes[2].Unpause(t)
}

func etcdClient(t *testing.T, eps ...string) *clientv3.Client {
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func etcdPut(c *clientv3.Client, d time.Duration, k string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := c.Put(ctx, k, "v"); err != nil {
		return err
	}
	r, err := c.Get(ctx, k)
	if err != nil {
		return err
	}
	if len(r.Kvs) != 1 {
		return fmt.Errorf("get %s: %d keys", k, len(r.Kvs))
	}
	return nil
}

func TestEtcd(t *testing.T) {
	t.Parallel()
	for _, v := range []struct {
		name  string
		start func(testing.TB) *testenv.Server
		want  string
	}{{"3.6", testenv.Etcd, "3.6."}, {"3.4", testenv.Etcd34, "3.4."}} {
		t.Run(v.name, func(t *testing.T) {
			s := v.start(t)
			c := etcdClient(t, s.Addr())
			if err := etcdPut(c, 5*time.Second, "/k"); err != nil {
				t.Fatal(err)
			}
			st, err := c.Status(ctxT(t, 5*time.Second), s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(st.Version, v.want) {
				t.Fatalf("server version %s, want %s*", st.Version, v.want)
			}
		})
	}
}

func TestEtcdCluster_PartitionAndRestart(t *testing.T) {
	t.Parallel()
	cl := testenv.EtcdCluster(t)
	all := etcdClient(t, cl.Addrs()...)
	if err := etcdPut(all, 10*time.Second, "/k"); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader(t)
	var minority *testenv.Server
	var majority []string
	for _, n := range cl.Nodes {
		if n != leader && minority == nil {
			minority = n
		} else {
			majority = append(majority, n.Addr())
		}
	}

	minority.Disconnect(t)
	if err := etcdPut(etcdClient(t, majority...), 10*time.Second, "/majority"); err != nil {
		t.Fatalf("majority not writable: %v", err)
	}
	if err := etcdPut(etcdClient(t, minority.Addr()), 3*time.Second, "/minority"); err == nil {
		t.Fatal("a disconnected minority member accepted a write")
	}
	minority.Reconnect(t)
	mc := etcdClient(t, minority.Addr())
	eventually(t, 30*time.Second, func() error { return etcdPut(mc, 3*time.Second, "/minority") })

	// A killed member rejoins on restart, with its data.
	minority.Kill(t)
	if err := etcdPut(etcdClient(t, majority...), 10*time.Second, "/while-down"); err != nil {
		t.Fatalf("two of three members not writable: %v", err)
	}
	minority.Restart(t)
	rc := etcdClient(t, minority.Addr())
	eventually(t, 30*time.Second, func() error { return etcdPut(rc, 3*time.Second, "/after-restart") })
}

// zkConnect connects with a session of 15 s: go-zookeeper closes a
// connection that answers nothing for two thirds of the session, and the
// slow-disk test holds a create (and the pings behind it) for 2 s of stall
// and the catch-up after it, which a quiet fresh-clone run on a loaded
// machine (2026-12-04) saw outlast a 4 s session's 2.7 s.
func zkConnect(t *testing.T, addrs ...string) *zk.Conn {
	c, _, err := zk.Connect(addrs, 15*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func zkCreateGet(c *zk.Conn, path string) error {
	if _, err := c.Create(path, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		return err
	}
	b, _, err := c.Get(path)
	if err != nil {
		return err
	}
	if string(b) != "v" {
		return fmt.Errorf("get %s = %q", path, b)
	}
	return nil
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	s := testenv.ZooKeeper(t)
	if err := zkCreateGet(zkConnect(t, s.Addr()), fmt.Sprintf("/smoke%d", time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
}

func TestZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	cl := testenv.ZooKeeperEnsemble(t)
	c := zkConnect(t, cl.Addrs()...)
	if err := zkCreateGet(c, "/a"); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader(t)
	// With a follower paused the other two keep a quorum.
	var follower *testenv.Server
	for _, n := range cl.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	follower.Pause(t)
	lc := zkConnect(t, leader.Addr())
	if err := zkCreateGet(lc, "/b"); err != nil {
		t.Fatalf("ensemble with one follower paused: %v", err)
	}
	follower.Unpause(t)
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	s := testenv.Postgres(t)
	query := func(dsn string, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		var one int
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			return err
		}
		if one != 1 {
			return fmt.Errorf("SELECT 1 = %d", one)
		}
		return nil
	}
	if err := query(s.DSN(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	db := testenv.PostgresDB(t)
	if err := query(db, 5*time.Second); err != nil {
		t.Fatalf("fresh database %s: %v", db, err)
	}

	s.Pause(t)
	if err := query(s.DSN(), time.Second); err == nil {
		t.Fatal("query to a paused server succeeded")
	}
	s.Unpause(t)
	if err := query(s.DSN(), 5*time.Second); err != nil {
		t.Fatal(err)
	}

	s.Kill(t)
	s.Restart(t)
	if err := query(db, 5*time.Second); err != nil {
		t.Fatalf("database after restart: %v", err)
	}
}

// Files of a spec are in the container, with their modes, before its
// server starts: the server reads its configuration from one.
func TestPrivate_FilesCopiedBeforeStart(t *testing.T) {
	t.Parallel()
	s := testenv.Private(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img testenv.Images, port int) launch.Spec {
		sp := launch.Redis(img.Server, port, "--include", "/etc/locker/extra/redis.conf")
		sp.Files = map[string]launch.File{
			"/etc/locker/extra/redis.conf": {Data: []byte("maxmemory 7mb\n")},
			"/etc/locker/secret.key":       {Data: []byte("k"), Mode: 0o600},
		}
		return sp
	})
	c := redisClient(t, s.Addr())
	got, err := c.ConfigGet(ctxT(t, 10*time.Second), "maxmemory").Result()
	if err != nil || got["maxmemory"] != strconv.Itoa(7<<20) {
		t.Fatalf("maxmemory %v (%v), want the included file's %d", got, err, 7<<20)
	}
	if out := s.Exec(t, "stat", "-c", "%a", "/etc/locker/secret.key"); strings.TrimSpace(out) != "600" {
		t.Fatalf("mode of secret.key: %q, want 600", out)
	}
}

// TestSlowDisk_StallHoldsWritesUntilResume: a server on a stalled disk
// accepts no write (each waits for its log flush) and takes them all once
// the disk resumes.
func TestSlowDisk_StallHoldsWritesUntilResume(t *testing.T) {
	t.Parallel()
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		s, d := testenv.EtcdOnSlowDisk(t)
		c := etcdClient(t, s.Addr())
		if err := etcdPut(c, 10*time.Second, "/before"); err != nil {
			t.Fatal(err)
		}
		d.Stall()
		if err := etcdPut(c, 2*time.Second, "/stalled"); err == nil {
			t.Fatal("etcd took a write while its disk was stalled")
		}
		d.Resume()
		eventually(t, 30*time.Second, func() error { return etcdPut(c, 3*time.Second, "/after") })
	})
	t.Run("zookeeper", func(t *testing.T) {
		t.Parallel()
		s, d := testenv.ZooKeeperOnSlowDisk(t)
		c := zkConnect(t, s.Addr())
		if err := zkCreateGet(c, "/before"); err != nil {
			t.Fatal(err)
		}
		d.Stall()
		created := make(chan error, 1)
		go func() { created <- zkCreateGet(c, "/stalled") }()
		select {
		case err := <-created:
			t.Fatalf("ZooKeeper answered a create while its disk was stalled: %v", err)
		case <-time.After(2 * time.Second):
		}
		d.Resume()
		select {
		case err := <-created:
			if err != nil {
				t.Fatalf("create held by the stall, after Resume: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a create held by the stall did not finish within 30 s of Resume")
		}
	})
}

// TestClock_JumpAndRateMoveTheServersWallClock: a server started with a Clock
// reads the host's clock until the test moves it; then its wall clock is
// ahead or behind by what the test said, while its monotonic clock is not
// moved. Each server reports its clock its own way: Redis's TIME, a new
// ZooKeeper node's ctime, PostgreSQL's clock_timestamp().
func TestClock_JumpAndRateMoveTheServersWallClock(t *testing.T) {
	t.Parallel()
	// check fails t unless the server's clock, read between two readings
	// of the host's, is ahead of it by want, give or take a second.
	check := func(t *testing.T, what string, c *testenv.Clock, read func() time.Time, want time.Duration) {
		t.Helper()
		before := time.Now()
		got := read()
		after := time.Now()
		if got.Before(before.Add(want-time.Second)) || got.After(after.Add(want+time.Second)) {
			t.Errorf("%s: the server's clock read %v between %v and %v on the host's, want %v ahead (Offset %v)",
				what, got, before, after, want, c.Offset())
		}
	}
	steps := func(t *testing.T, c *testenv.Clock, read func() time.Time) {
		check(t, "at start", c, read, 0)
		c.Jump(t, time.Hour)
		check(t, "after Jump(1h)", c, read, time.Hour)
		c.Jump(t, -3*time.Hour)
		check(t, "after Jump(-3h)", c, read, -2*time.Hour)
		c.Reset(t)
		c.SetRate(t, 100_000) // 10% fast: 0.3 s ahead after 3 s
		time.Sleep(3 * time.Second)
		if off := c.Offset(); off < 300*time.Millisecond {
			t.Errorf("Offset after 3 s at +10%% = %v, want at least 300ms", off)
		}
		check(t, "after 3 s at +10%", c, read, c.Offset())
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		s, c := testenv.RedisWithClock(t)
		r := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { r.Close() })
		read := func() time.Time {
			tm, err := r.Time(ctxT(t, 5*time.Second)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return tm
		}
		steps(t, c, read)
		// A key's expiry is on the wall clock: a jump past it expires it.
		// Each command has a context of its own: the Jump between them is
		// a docker exec, which took the whole of a shared 5 s on a
		// fresh-clone run's loaded machine (2026-12-04, Q19).
		c.Reset(t)
		if err := r.Set(ctxT(t, 5*time.Second), "k", "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		c.Jump(t, 2*time.Minute)
		if n, err := r.Exists(ctxT(t, 5*time.Second), "k").Result(); err != nil || n != 0 {
			t.Errorf("a key with a minute to live, after the clock jumped 2 minutes: EXISTS = %d, %v; want 0", n, err)
		}
	})
	t.Run("zookeeper", func(t *testing.T) {
		t.Parallel()
		s, c := testenv.ZooKeeperWithClock(t)
		z := zkConnect(t, s.Addr())
		n := 0
		read := func() time.Time {
			n++
			if _, err := z.Create(fmt.Sprintf("/clock%d", n), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			_, st, err := z.Get(fmt.Sprintf("/clock%d", n))
			if err != nil {
				t.Fatal(err)
			}
			return time.UnixMilli(st.Ctime)
		}
		steps(t, c, read)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s, c := testenv.PostgresWithClock(t)
		pc, err := pgx.Connect(ctxT(t, 30*time.Second), s.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close(context.Background()) })
		read := func() time.Time {
			var tm time.Time
			if err := pc.QueryRow(ctxT(t, 5*time.Second), "SELECT clock_timestamp()").Scan(&tm); err != nil {
				t.Fatal(err)
			}
			return tm
		}
		steps(t, c, read)
	})
}

// A Jump that failed (here: the server is down, so the clock file cannot
// be written) moves nothing, so that the nemesis's retry of it jumps once,
// not twice.
func TestClock_FailedJump_MovesNothing(t *testing.T) {
	s, c := testenv.RedisWithClock(t)
	s.Kill(t)
	if failed := fails(func(tb testing.TB) { c.Jump(tb, time.Hour) }); !failed {
		t.Fatal("Jump of a stopped server's clock reported no failure")
	}
	if off := c.Offset(); off != 0 {
		t.Errorf("Offset after a failed Jump(1h) = %v, want 0", off)
	}
}

// fails reports whether f failed the TB it was given (Fatal and friends
// end f without ending the test).
func fails(f func(testing.TB)) (failed bool) {
	tb := &recordingTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(recordedFailure); !ok {
				panic(r)
			}
			failed = true
		}
	}()
	f(tb)
	return false
}

type recordedFailure struct{}

// recordingTB turns a failure into a panic that fails recovers.
type recordingTB struct{ testing.TB }

func (*recordingTB) Helper()               {}
func (*recordingTB) Logf(string, ...any)   {}
func (*recordingTB) Fatalf(string, ...any) { panic(recordedFailure{}) }
func (*recordingTB) Fatal(...any)          { panic(recordedFailure{}) }
func (*recordingTB) Errorf(string, ...any) { panic(recordedFailure{}) }
func (*recordingTB) FailNow()              { panic(recordedFailure{}) }
