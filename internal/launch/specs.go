package launch

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A Spec says how to run one container.
type Spec struct {
	Kind       string // "redis", "etcd", …: names and messages
	Image      string
	Entrypoint []string // nil for the image's own
	Cmd        []string
	// Services are the servers the container runs, each published on
	// 127.0.0.1 under the port it listens on.
	Services []Service
	// ExtraHosts are /etc/hosts lines ("name:ip", ip may be host-gateway).
	ExtraHosts []string
	// Network, if not nil, is a private network the container joins under
	// Alias, besides the default bridge.
	Network *Network
	Alias   string
	// Files are copied into the container before it starts, by absolute
	// path (certificates, keys, configuration): owned by root, mode 0644
	// unless File.Mode says otherwise.
	Files map[string]File
	// Binds are host directories mounted into the container
	// ("/host/dir:/container/dir"): a data directory on a disk the test
	// controls, say.
	Binds []string
	// Data are the directories the servers keep their state in. Each is a
	// Docker volume of the container (unless a Bind mounts it): written to
	// the machine's own file system, not through the storage driver —
	// fuse-overlayfs, where the engine runs without kernel overlayfs, took
	// a tenth of a CI run's CPU passing the servers' log writes, fsyncs and
	// PostgreSQL's CREATE DATABASE copies through a FUSE daemon. A volume
	// lives as long as its container, so a server killed and started again
	// finds its data, as on the container's own file system.
	Data []string
	// Env are more environment variables of the container ("NAME=value").
	Env []string
}

// A File is the content and mode of one file of Spec.Files.
type File struct {
	Data []byte
	Mode int64 // 0 means 0644
}

// A Service is one server of a container.
type Service struct {
	Kind  string
	Port  int
	Probe Probe
}

// A Probe asks the server at addr the question that proves it serves
// clients — not merely that a port is open: Docker's port publishing accepts
// connections before the server in the container listens — and returns the
// server's version.
type Probe func(ctx context.Context, addr string) (version string, err error)

// Addr returns the address clients dial: "127.0.0.1:port".
func (s Service) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Ready waits until the server answers its probe, or ctx ends, and returns
// its version.
func (s Service) Ready(ctx context.Context) (string, error) {
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := s.Probe(pctx, s.Addr())
		cancel()
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("not answering at %s: %v", s.Addr(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Redis runs redis-server on port without persistence (no snapshots, no
// append-only file), so that a kill and restart loses its data, as a real
// cache-mode Redis would; extra are more redis-server flags.
func Redis(image string, port int, extra ...string) Spec {
	return Spec{
		Kind:       "redis",
		Image:      image,
		Entrypoint: []string{"redis-server"},
		Cmd: append([]string{"--port", strconv.Itoa(port), "--bind", "0.0.0.0", "--protected-mode", "no",
			"--save", "", "--appendonly", "no"}, extra...),
		Services: []Service{{"redis", port, RedisInfo}},
	}
}

// Etcd runs member name of the cluster initial ("e1=http://…:2380,…"),
// serving clients on port; entrypoint nil means the image's own. token must
// be the same for every member of one cluster and unique across clusters.
func Etcd(image string, entrypoint []string, port int, name, initial, peerURL, token string) Spec {
	client := "http://127.0.0.1:" + strconv.Itoa(port)
	return Spec{
		Kind: "etcd", Image: image, Entrypoint: entrypoint, Data: []string{"/data"},
		Cmd: []string{
			"--name", name, "--data-dir", "/data",
			"--listen-client-urls", "http://0.0.0.0:" + strconv.Itoa(port),
			// What the server tells clients (the member list the client
			// balances over): the address the client dials.
			"--advertise-client-urls", client,
			"--listen-peer-urls", "http://0.0.0.0:2380",
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", initial,
			// Members of different clusters must never merge.
			"--initial-cluster-token", token,
			"--log-level", "warn",
		},
		Services: []Service{{"etcd", port, EtcdHealth}},
	}
}

// EtcdSingle runs a one-member etcd cluster on port.
func EtcdSingle(image string, entrypoint []string, port int) Spec {
	return Etcd(image, entrypoint, port, "e1", "e1=http://127.0.0.1:2380", "http://127.0.0.1:2380", "locker-"+RandomID(4))
}

// ZooKeeperConfig is zoo.cfg for a server with clientPort port. tickTime=200
// allows short sessions; the session limits are set explicitly because the
// defaults (2 and 20 ticks) would cap sessions at 4 s. maxClientCnxns=0
// lifts the limit of 60 connections from one address: every test and bench
// client is on 127.0.0.1, and lockctl bench opens 64 Lockers.
func ZooKeeperConfig(port int) string {
	return fmt.Sprintf(`tickTime=200
initLimit=20
syncLimit=10
dataDir=/data
clientPort=%d
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=400
maxSessionTimeout=60000
quorumListenOnAllIPs=true
maxClientCnxns=0
`, port)
}

// ZooKeeperOptions are the optional parts of a ZooKeeper server.
type ZooKeeperOptions struct {
	ID      int    // myid; 0 means 1
	Servers string // more zoo.cfg lines: an ensemble's server.N lines
	Setup   string // shell lines run before the server starts
	JVM     string // more JVM flags
}

// ZooKeeper runs a ZooKeeper 3.8 server with ZooKeeperConfig(port).
func ZooKeeper(image string, port int, o ZooKeeperOptions) Spec {
	script := fmt.Sprintf(`set -e
mkdir -p /data
echo %d >/data/myid
%s
cat >/tmp/zoo.cfg <<'EOF'
%s%sEOF
exec java -Xmx256m -XX:+UseSerialGC -Dzookeeper.log.dir=/tmp %s \
	-cp '/usr/share/java/*:/etc/zookeeper/conf' org.apache.zookeeper.server.quorum.QuorumPeerMain /tmp/zoo.cfg
`, max(o.ID, 1), o.Setup, ZooKeeperConfig(port), o.Servers, o.JVM)
	return Spec{
		Kind:       "zookeeper",
		Image:      image,
		Entrypoint: []string{"sh", "-c", script},
		Data:       []string{"/data"},
		Services:   []Service{{"zookeeper", port, ZooKeeperServing}},
	}
}

// PostgresData holds the data directories of every PostgreSQL spec (a
// volume, see Spec.Data).
const PostgresData = "/var/lib/locker"

// pgScript initialises a cluster on first start only, so that a restarted
// server keeps its data. initdb's trust applies to local connections only,
// and ours come from the bridge gateway, hence the host line (the port is
// published on 127.0.0.1 only).
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
	-c listen_addresses='*' -c unix_socket_directories=/tmp %s
`

// Postgres runs PostgreSQL 15 on port, user postgres, trust authentication;
// settings are more "name=value" server settings (-c).
func Postgres(image string, port int, settings ...string) Spec {
	return Spec{
		Kind:       "postgres",
		Image:      image,
		Entrypoint: []string{"sh", "-c", fmt.Sprintf(pgScript, port, pgFlags(settings))},
		Data:       []string{PostgresData},
		Services:   []Service{{"postgres", port, PostgresPing}},
	}
}

// PostgresDSN is the libpq URL of the PostgreSQL server at addr.
func PostgresDSN(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// Combine runs the servers of specs, all of one image, in one container
// (each container start copies the whole image on the vfs storage driver
// some engines use: one copy instead of several saves most of a minute).
// Their Entrypoint and Cmd run as background jobs of one shell; their
// ExtraHosts and Network are not supported.
func Combine(kind string, specs ...Spec) Spec {
	var script strings.Builder
	c := Spec{Kind: kind, Entrypoint: []string{"sh", "-c"}}
	for _, sp := range specs {
		if c.Image == "" {
			c.Image = sp.Image
		}
		if sp.Image != c.Image || sp.Entrypoint == nil || sp.Network != nil || len(sp.ExtraHosts) > 0 {
			panic("launch: Combine of a " + sp.Kind + " spec it cannot run")
		}
		for _, a := range append(append([]string(nil), sp.Entrypoint...), sp.Cmd...) {
			script.WriteString(shellQuote(a) + " ")
		}
		script.WriteString("&\n")
		c.Services = append(c.Services, sp.Services...)
		for _, d := range sp.Data {
			if !slices.Contains(c.Data, d) {
				c.Data = append(c.Data, d)
			}
		}
	}
	script.WriteString("wait\n")
	c.Entrypoint = append(c.Entrypoint, script.String())
	return c
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
