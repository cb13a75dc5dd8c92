package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/slowdisk"
)

// A Cluster is a group of servers private to the calling test, removed at
// its t.Cleanup. Members of etcd, ZooKeeper and Redis Cluster clusters talk
// to one another on a private Docker network, which Disconnect cuts.
type Cluster struct {
	// Nodes are the members, in a fixed order.
	Nodes []*Server
	// Disks are the members' data directories, in the order of Nodes, for
	// a cluster started on slow disks; nil otherwise. A member's
	// replacement gets its disk, emptied.
	Disks []*slowdisk.Disk
	kind  string
}

// Addrs returns every member's client address, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr()
	}
	return a
}

// Leader returns the current leader of an etcd cluster or ZooKeeper
// ensemble, waiting up to 30 s for one: just after a fault there may be an
// election under way.
func (c *Cluster) Leader(t testing.TB) *Server {
	t.Helper()
	var leader *Server
	err := poll(30*time.Second, func(ctx context.Context) error {
		for _, n := range c.Nodes {
			switch c.kind {
			case "etcd":
				if ok, _ := launch.EtcdIsLeader(ctx, n.Addr()); ok {
					leader = n
					return nil
				}
			case "zookeeper":
				if r, _ := launch.ZooKeeperSrvr(ctx, n.Addr()); strings.Contains(r, "Mode: leader") {
					leader = n
					return nil
				}
			default:
				return fmt.Errorf("a %s cluster has no leader", c.kind)
			}
		}
		return fmt.Errorf("no member says it leads")
	})
	if err != nil {
		t.Fatalf("testenv: leader of %s cluster: %v", c.kind, err)
	}
	return leader
}

// newCluster starts n members made by mk (given each member's index and
// every member's port) in parallel, on a private network when withNet. The
// members are not waited for; the caller decides what ready means.
func newCluster(t testing.TB, kind string, n int, withNet bool, mk func(img Images, i int, ports []int) launch.Spec) *Cluster {
	t.Helper()
	return newClusterThen(t, kind, n, withNet, mk, nil)
}

// newClusterThen is newCluster calling started, if not nil, once every
// member's container runs and before any is waited for.
func newClusterThen(t testing.TB, kind string, n int, withNet bool, mk func(img Images, i int, ports []int) launch.Spec, started func(*Cluster)) *Cluster {
	t.Helper()
	d, err := docker()
	if err != nil {
		unavailable(t, "a %s cluster needs Docker (the LOCKER_TEST_* variables name single servers only): %v", kind, err)
	}
	server, etcd := findImagesOnce(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var nw *launch.Network
	if withNet {
		nw, err = d.NewNetwork(ctx)
		if err != nil {
			t.Fatalf("testenv: %s cluster: %v", kind, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Members still attached make removal fail; they are removed
			// first, because cleanups run last-registered first.
			if err := nw.Remove(ctx); err != nil {
				t.Errorf("testenv: remove network: %v", err)
			}
		})
	}
	ports, err := launch.FreePorts(n)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	c := &Cluster{Nodes: make([]*Server, n), kind: kind}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp := mk(Images{Server: server, Etcd: etcd}, i, ports)
			if withNet {
				sp.Network, sp.Alias = nw, fmt.Sprintf("%s%d", kind, i+1)
			}
			c.Nodes[i], errs[i] = startServer(ctx, d, sp, true)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range c.Nodes {
			if s != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.remove()
				}()
			}
		}
		wg.Wait()
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	if started != nil {
		started(c)
	}
	// Every member must answer its probe (etcd: have a leader, ZooKeeper:
	// serve as leader or follower), in parallel since they form a quorum
	// together.
	for i, s := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.c.Ready(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("testenv: %s member %d: %v", kind, i+1, err)
		}
	}
	t.Logf("testenv: %d-member %s cluster started in %v at %v", n, kind, time.Since(start).Round(time.Millisecond), c.Addrs())
	return c
}

// RedisMasters returns n independent Redis masters, for Redlock.
func RedisMasters(t testing.TB, n int) *Cluster {
	t.Helper()
	return newCluster(t, "redis", n, false, func(img Images, i int, ports []int) launch.Spec {
		return launch.Redis(img.Server, ports[i])
	})
}

// RedisCluster returns a Redis Cluster of 3 masters (no replicas) covering
// all slots. Members tell clients their published 127.0.0.1 address in MOVED
// replies and CLUSTER SLOTS, so a cluster client follows redirections from
// the test process. A member that stops does not stop the others serving
// their slots (cluster-require-full-coverage no).
//
// The address is announced as the members' hostname rather than with
// cluster-announce-ip, because the announced ip is also what peers use for
// the cluster bus, and 127.0.0.1 in one container is not another container.
func RedisCluster(t testing.TB) *Cluster {
	t.Helper()
	c := newCluster(t, "redis", 3, true, func(img Images, i int, ports []int) launch.Spec {
		return launch.Redis(img.Server, ports[i],
			"--cluster-enabled", "yes",
			"--cluster-config-file", "/tmp/nodes.conf",
			"--cluster-node-timeout", "5000",
			"--cluster-require-full-coverage", "no",
			"--cluster-announce-hostname", "127.0.0.1",
			"--cluster-preferred-endpoint-type", "hostname")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Peers meet on the private network, by address: CLUSTER MEET takes
	// no names.
	args := []string{"redis-cli", "--cluster", "create"}
	for _, s := range c.Nodes {
		ip, _, err := s.c.Endpoint(ctx, s.c.Spec.Network.Name)
		if err != nil {
			t.Fatalf("testenv: redis cluster: %v", err)
		}
		args = append(args, net.JoinHostPort(ip.String(), strconv.Itoa(s.svc.Port)))
	}
	args = append(args, "--cluster-yes")
	code, out, err := c.Nodes[0].c.Exec(ctx, args...)
	if err != nil || code != 0 {
		t.Fatalf("testenv: redis-cli --cluster create: exit %d, %v: %s", code, err, out)
	}
	for i, s := range c.Nodes {
		if err := poll(30*time.Second, func(ctx context.Context) error { return launch.RedisClusterOK(ctx, s.Addr()) }); err != nil {
			t.Fatalf("testenv: redis cluster member %d: %v", i+1, err)
		}
	}
	return c
}

// EtcdCluster returns a 3-member etcd 3.6 cluster. Each member advertises
// its published 127.0.0.1 client address, so clients that sync endpoints
// from the member list keep reaching them.
func EtcdCluster(t testing.TB) *Cluster {
	t.Helper()
	return etcdCluster(t, nil)
}

// EtcdClusterOnSlowDisks is EtcdCluster with each member's data directory
// on a slowdisk.Disk of its own (Cluster.Disks).
func EtcdClusterOnSlowDisks(t testing.TB) *Cluster {
	t.Helper()
	return etcdCluster(t, mountSlowDisks(t, 3))
}

func etcdCluster(t testing.TB, disks []*slowdisk.Disk) *Cluster {
	t.Helper()
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("e%d=http://etcd%d:2380", i+1, i+1))
	}
	token := "locker-" + launch.RandomID(4)
	return quorum(t, "etcd", disks, func(img Images, i int, ports []int) launch.Spec {
		return etcdMember(img.Etcd, nil, ports[i], fmt.Sprintf("e%d", i+1), strings.Join(initial, ","), fmt.Sprintf("http://etcd%d:2380", i+1), token)
	})
}

// etcdMember is launch.Etcd for a member of an etcd 3.6 cluster, which
// snapshots every 1,000 entries and keeps 500 after a snapshot for a
// follower behind (the defaults: 10,000 and 5,000). A member added under
// a soak's writes got every entry since the last snapshot to apply, stayed
// more than 5,000 behind for minutes while it retried its own publication
// in a loop ("too many requests"), and never served; with a snapshot at
// most 1,500 entries old it starts from the snapshot and is only as far
// behind as the entries after it.
func etcdMember(image string, entrypoint []string, port int, name, initial, peerURL, token string) launch.Spec {
	sp := launch.Etcd(image, entrypoint, port, name, initial, peerURL, token)
	sp.Cmd = append(sp.Cmd, "--snapshot-count", "1000", "--snapshot-catchup-entries", "500")
	return sp
}

// ZooKeeperEnsemble returns a 3-server ZooKeeper 3.8 ensemble with the
// settings of ZooKeeper.
func ZooKeeperEnsemble(t testing.TB) *Cluster {
	t.Helper()
	return zooKeeperEnsemble(t, nil)
}

// ZooKeeperEnsembleOnSlowDisks is ZooKeeperEnsemble with each server's data
// directory on a slowdisk.Disk of its own (Cluster.Disks).
func ZooKeeperEnsembleOnSlowDisks(t testing.TB) *Cluster {
	t.Helper()
	return zooKeeperEnsemble(t, mountSlowDisks(t, 3))
}

func zooKeeperEnsemble(t testing.TB, disks []*slowdisk.Disk) *Cluster {
	t.Helper()
	var servers strings.Builder
	for i := range 3 {
		fmt.Fprintf(&servers, "server.%d=zookeeper%d:2888:3888\n", i+1, i+1)
	}
	return quorum(t, "zookeeper", disks, func(img Images, i int, ports []int) launch.Spec {
		return zkSpec(img, ports[i], i+1, servers.String())
	})
}

// quorum starts a 3-member cluster of the members mk makes, on a private
// network, each member on disks[i] when disks is not nil.
func quorum(t testing.TB, kind string, disks []*slowdisk.Disk, mk func(img Images, i int, ports []int) launch.Spec) *Cluster {
	t.Helper()
	c := newCluster(t, kind, 3, true, func(img Images, i int, ports []int) launch.Spec {
		sp := mk(img, i, ports)
		if disks != nil {
			onDisk(&sp, disks[i])
		}
		return sp
	})
	c.Disks = disks
	return c
}

// A LinkedEnsemble is a 3-server ZooKeeper ensemble whose members reach one
// another only through proxies in the test process (one per member and
// direction, for the quorum and the election port), so that Isolate can cut
// one member off its peers silently — the packets held, the connections
// left open, as behind a dead switch — while clients still reach it through
// its published client port. A follower cut off so serves reads from its
// stale copy until it misses the leader for syncLimit ticks, which here is
// 50 ticks (10 s), far longer than the sessions the tests use.
//
// The members reach the proxies at the Docker bridge's gateway
// (host.docker.internal, mapped to host-gateway), and the proxies reach the
// members at their bridge addresses: this needs an engine on the test
// machine's own network (Linux), not Docker Desktop.
type LinkedEnsemble struct {
	*Cluster
	links [][]*Proxy // links[i]: every proxy carrying traffic to or from member i
}

// ZooKeeperEnsembleLinked returns a LinkedEnsemble, removed at t.Cleanup.
func ZooKeeperEnsembleLinked(t testing.TB) *LinkedEnsemble {
	t.Helper()
	const n = 3
	free := func() int {
		p, err := launch.FreePort()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		return p
	}
	// own[i]: the quorum and election ports member i listens on, and the
	// address it tells peers it has (the proxy of the same port, which the
	// election protocol dials back); via[i][j]: member j as member i sees it.
	var own, via [n][n][2]int
	for i := range n {
		own[i][i] = [2]int{free(), free()}
		for j := range n {
			if j != i {
				via[i][j] = [2]int{free(), free()}
			}
		}
	}
	e := &LinkedEnsemble{links: make([][]*Proxy, n)}
	e.Cluster = newClusterThen(t, "zookeeper", n, false, func(img Images, i int, ports []int) launch.Spec {
		var servers strings.Builder
		for j := range n {
			p := via[i][j]
			if j == i {
				p = own[i][i]
			}
			fmt.Fprintf(&servers, "server.%d=host.docker.internal:%d:%d\n", j+1, p[0], p[1])
		}
		servers.WriteString("syncLimit=50\n")
		sp := zkSpec(img, ports[i], i+1, servers.String())
		sp.ExtraHosts = []string{"host.docker.internal:host-gateway"}
		return sp
	}, func(c *Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var ip [n]string
		gw := ""
		for i, s := range c.Nodes {
			addr, gateway, err := s.c.Endpoint(ctx, "bridge")
			if err != nil || !gateway.IsValid() {
				t.Fatalf("testenv: linked ensemble: member %d: no address and gateway on the bridge network (%v)", i+1, err)
			}
			ip[i], gw = addr.String(), gateway.String()
		}
		link := func(listen, upstream string, members ...int) {
			p := newProxy(t, "zookeeper-link", listen, upstream)
			for _, m := range members {
				e.links[m] = append(e.links[m], p)
			}
		}
		for i := range n {
			for k := range 2 {
				port := strconv.Itoa(own[i][i][k])
				link(net.JoinHostPort(gw, port), net.JoinHostPort(ip[i], port), i)
				for j := range n {
					if j != i {
						link(net.JoinHostPort(gw, strconv.Itoa(via[i][j][k])), net.JoinHostPort(ip[j], strconv.Itoa(own[j][j][k])), i, j)
					}
				}
			}
		}
	})
	return e
}

// Isolate cuts member i off its peers (not off clients) until Heal.
func (e *LinkedEnsemble) Isolate(t testing.TB, i int) {
	t.Helper()
	for _, p := range e.links[i] {
		p.Blackhole(t)
	}
}

// Heal lets every member reach every other again.
func (e *LinkedEnsemble) Heal(t testing.TB) {
	t.Helper()
	for _, l := range e.links {
		for _, p := range l {
			p.Heal(t)
		}
	}
}
