// Package servers starts, for a benchmark run, the four lock services locker
// supports — Redis (one server and, optionally, independent masters for
// Redlock), etcd, ZooKeeper and PostgreSQL — as Docker containers of the
// images scripts/test-images builds locally, published on 127.0.0.1 only,
// and removes them afterwards. It drives the docker command line, so it
// needs nothing but a Docker engine and the images (built on first use).
//
// Redis, ZooKeeper and PostgreSQL run in one container of the server image
// (each container start copies the whole image on the vfs storage driver
// our machines use; one copy instead of three or eight saves most of a
// minute); etcd 3.6 runs in its own image. Each container carries the label
// org.distlock.locker.bench=1 and the id of the process that made it; Start
// removes leftovers of processes that died without cleaning up.
//
// Like package benchkit it is not part of locker's API.
package servers

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/internal/testimages"
	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

const (
	label    = "org.distlock.locker.bench"
	labelPID = "org.distlock.locker.bench.pid"
)

// Options says what to start.
type Options struct {
	// RedlockMasters is the number of independent Redis masters to start
	// for Redlock besides the single Redis server; 0 for none.
	RedlockMasters int
	// Log receives a line per step; nil for none.
	Log io.Writer
}

// Servers are running servers; Close removes them.
type Servers struct {
	Redis     string   // host:port
	Redlock   []string // host:port of each master
	Etcd      string   // host:port
	ZooKeeper string   // host:port
	Postgres  string   // postgres:// DSN, user postgres, trust authentication
	// Info lists each server's version and address.
	Info []benchkit.Server

	pgAddr     string
	containers []string
	log        io.Writer
}

// RedisURL, RedlockURL, EtcdURL, ZooKeeperURL and PostgresURL are the
// locker URLs of the servers. PostgresURL asks for a pool big enough for
// the largest handoff (128 waiters, each pinning a connection).
func (s *Servers) RedisURL() string { return "redis://" + s.Redis }

// RedlockURL is the redlock:// URL of the masters; "" without masters.
func (s *Servers) RedlockURL() string {
	if len(s.Redlock) == 0 {
		return ""
	}
	return "redlock://" + strings.Join(s.Redlock, ",")
}

// EtcdURL is the etcd:// URL of the etcd server.
func (s *Servers) EtcdURL() string { return "etcd://" + s.Etcd }

// ZooKeeperURL is the zookeeper:// URL of the ZooKeeper server.
func (s *Servers) ZooKeeperURL() string { return "zookeeper://" + s.ZooKeeper }

// PostgresURL is the postgres:// URL of the PostgreSQL server, with a
// connection budget (and pool) of 160 connections.
func (s *Servers) PostgresURL() string { return s.Postgres + "&pool_max_conns=160&max_conns=160" }

// URLs lists every locker URL: Redis, Redlock (when started), etcd,
// ZooKeeper, PostgreSQL.
func (s *Servers) URLs() []string {
	urls := []string{s.RedisURL()}
	if u := s.RedlockURL(); u != "" {
		urls = append(urls, u)
	}
	return append(urls, s.EtcdURL(), s.ZooKeeperURL(), s.PostgresURL())
}

func (s *Servers) logf(format string, args ...any) {
	if s.log != nil {
		fmt.Fprintf(s.log, "servers: "+format+"\n", args...)
	}
}

// Start starts the servers and waits until each answers; on error it
// removes what it started.
func Start(ctx context.Context, o Options) (_ *Servers, err error) {
	s := &Servers{log: o.Log}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, errors.New("servers: no docker command on PATH; start the servers yourself and pass their URLs with --backend")
	}
	removeLeftovers(ctx)
	serverImage, etcdImage, err := testimages.Ensure(ctx, s.logf)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(4 + o.RedlockMasters)
	if err != nil {
		return nil, err
	}
	redisPort, etcdPort, zkPort, pgPort := ports[0], ports[1], ports[2], ports[3]
	redlockPorts := ports[4:]
	at := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	s.Redis, s.Etcd, s.ZooKeeper = at(redisPort), at(etcdPort), at(zkPort)
	s.pgAddr = at(pgPort)
	s.Postgres = "postgres://postgres@" + at(pgPort) + "/postgres?sslmode=disable"
	for _, p := range redlockPorts {
		s.Redlock = append(s.Redlock, at(p))
	}

	id := randomID()
	start := time.Now()
	script := serverScript(append([]int{redisPort}, redlockPorts...), zkPort, pgPort)
	if err := s.run(ctx, "locker-bench-servers-"+id, serverImage, append([]int{redisPort, zkPort, pgPort}, redlockPorts...),
		[]string{"--entrypoint", "sh"}, "-c", script); err != nil {
		return nil, err
	}
	if err := s.run(ctx, "locker-bench-etcd-"+id, etcdImage, []int{etcdPort}, nil,
		"--name", "e1", "--data-dir", "/data",
		"--listen-client-urls", "http://0.0.0.0:"+strconv.Itoa(etcdPort),
		"--advertise-client-urls", "http://"+at(etcdPort),
		"--listen-peer-urls", "http://0.0.0.0:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "e1=http://127.0.0.1:2380", "--initial-cluster-token", "locker-bench-"+id,
		"--log-level", "warn"); err != nil {
		return nil, err
	}
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	s.logf("up in %v", time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

// Close removes the containers.
func (s *Servers) Close() error {
	if len(s.containers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"rm", "-f", "-v"}, s.containers...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("servers: docker rm: %v: %s", err, bytes.TrimSpace(out))
	}
	s.logf("removed %d containers", len(s.containers))
	s.containers = nil
	return nil
}

// run starts a detached container publishing ports on 127.0.0.1.
func (s *Servers) run(ctx context.Context, name, image string, ports []int, opts []string, args ...string) error {
	cmd := []string{"run", "-d", "--name", name, "--label", label + "=1", "--label", labelPID + "=" + strconv.Itoa(os.Getpid())}
	for _, p := range ports {
		cmd = append(cmd, "-p", fmt.Sprintf("127.0.0.1:%d:%d", p, p))
	}
	cmd = append(cmd, opts...)
	cmd = append(cmd, image)
	cmd = append(cmd, args...)
	out, err := exec.CommandContext(ctx, "docker", cmd...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("servers: docker run %s: %v: %s", image, err, bytes.TrimSpace(out))
	}
	s.containers = append(s.containers, strings.TrimSpace(string(out)))
	s.logf("started %s (%s)", name, image)
	return nil
}

// zkConfig is the testenv configuration: tickTime=200, sessions of 0.4 to
// 60 s.
const zkConfig = `tickTime=200
initLimit=20
syncLimit=10
dataDir=/data/zk
clientPort=%d
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=400
maxSessionTimeout=60000
`

// serverScript starts the Redis servers (persistence off, as in testenv),
// ZooKeeper and PostgreSQL (initdb as user postgres, trust from any
// address: the port is published on 127.0.0.1 only).
func serverScript(redisPorts []int, zkPort, pgPort int) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, p := range redisPorts {
		fmt.Fprintf(&b, "redis-server --port %d --bind 0.0.0.0 --protected-mode no --save '' --appendonly no --daemonize yes --logfile /tmp/redis-%d.log\n", p, p)
	}
	fmt.Fprintf(&b, "mkdir -p /data/zk\necho 1 >/data/zk/myid\ncat >/tmp/zoo.cfg <<'EOF'\n%sEOF\n", fmt.Sprintf(zkConfig, zkPort))
	b.WriteString("java -Xmx256m -XX:+UseSerialGC -Dzookeeper.log.dir=/tmp -cp '/usr/share/java/*:/etc/zookeeper/conf' org.apache.zookeeper.server.quorum.QuorumPeerMain /tmp/zoo.cfg >/tmp/zk.log 2>&1 &\n")
	fmt.Fprintf(&b, `D=/var/lib/locker/pg
mkdir -p $D
chown postgres:postgres $D
setpriv --reuid=postgres --regid=postgres --init-groups initdb -D $D -A trust -U postgres --no-sync >/tmp/initdb.log
echo 'host all all 0.0.0.0/0 trust' >>$D/pg_hba.conf
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D $D -p %d -c listen_addresses='*' -c unix_socket_directories=/tmp -c max_connections=400
`, pgPort)
	return b.String()
}

// wait polls every server until it answers and records its version.
func (s *Servers) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	type probe struct {
		name, addr string
		version    func(ctx context.Context) (string, error)
	}
	probes := []probe{{"Redis", s.Redis, func(ctx context.Context) (string, error) { return redisVersion(ctx, s.Redis) }}}
	for i, a := range s.Redlock {
		probes = append(probes, probe{fmt.Sprintf("Redis (Redlock master %d)", i+1), a, func(ctx context.Context) (string, error) { return redisVersion(ctx, a) }})
	}
	probes = append(probes,
		probe{"etcd", s.Etcd, func(ctx context.Context) (string, error) { return etcdVersion(ctx, s.Etcd) }},
		probe{"ZooKeeper", s.ZooKeeper, func(ctx context.Context) (string, error) { return zkVersion(ctx, s.ZooKeeper) }},
		probe{"PostgreSQL", s.pgAddr, func(ctx context.Context) (string, error) { return pgVersion(ctx, s.Postgres) }},
	)
	for _, p := range probes {
		var last error
		for {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := p.version(pctx)
			pcancel()
			if err == nil {
				s.Info = append(s.Info, benchkit.Server{Name: p.name, Version: v, Address: p.addr})
				break
			}
			last = err
			select {
			case <-ctx.Done():
				return fmt.Errorf("servers: %s at %s did not answer: %v%s", p.name, p.addr, last, s.logs())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// logs returns the tail of the containers' output, for an error message.
func (s *Servers) logs() string {
	var b strings.Builder
	for _, c := range s.containers {
		out, _ := exec.Command("docker", "logs", "--tail", "20", c).CombinedOutput()
		fmt.Fprintf(&b, "\n--- docker logs %s:\n%s", c[:min(12, len(c))], out)
	}
	return b.String()
}

func redisVersion(ctx context.Context, addr string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "redis-server " + v, nil
		}
	}
	return "redis-server (version unknown)", nil
}

func etcdVersion(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	var h struct{ Health string }
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || h.Health != "true" {
		return "", fmt.Errorf("health %q: %v", h.Health, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct{ Etcdserver string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", err
	}
	return "etcd " + v.Etcdserver, nil
}

func zkVersion(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Zookeeper version: "); ok {
			return "ZooKeeper " + strings.Split(v, ",")[0], nil
		}
	}
	return "", fmt.Errorf("srvr: no version in the answer (%v)", sc.Err())
}

func pgVersion(ctx context.Context, dsn string) (string, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", err
	}
	return "PostgreSQL " + strings.Fields(v)[0], nil
}

// removeLeftovers removes bench containers whose process is gone.
func removeLeftovers(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label="+label,
		"--format", `{{.ID}} {{.Label "`+labelPID+`"}}`).Output()
	if err != nil {
		return
	}
	var dead []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, pid, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(pid)
		if err != nil || !processExists(n) {
			dead = append(dead, id)
		}
	}
	if len(dead) > 0 {
		_ = exec.CommandContext(ctx, "docker", append([]string{"rm", "-f", "-v"}, dead...)...).Run()
	}
}

// freePorts finds n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
