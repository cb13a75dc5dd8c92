package launch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// SentinelMaster is the name under which RedisSentinel's sentinel monitors
// its master.
const SentinelMaster = "locker"

// Users the data nodes of a RedisSentinel deployment with auth have
// besides the default user, each with the least the server side needs
// (Redis's own documentation of replication and Sentinel ACLs):
// the replica's replication link, and the sentinel's monitoring and
// failover commands.
const (
	SentinelReplicationUser = "replicator"
	SentinelMonitorUser     = "sentinel"
)

// sentinelUserRules are the ACL rules of SentinelReplicationUser and
// SentinelMonitorUser, after their password.
var sentinelUserRules = map[string][]string{
	SentinelReplicationUser: {"+psync", "+replconf", "+ping"},
	SentinelMonitorUser: {"allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe", "+config|rewrite",
		"+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill"},
}

// SentinelAuth is the authentication of a RedisSentinel deployment; the
// zero value runs every server open.
type SentinelAuth struct {
	// Data is the password of the data nodes' default user (requirepass,
	// the administrator's); with it, the replica and the sentinel log in
	// as SentinelReplicationUser and SentinelMonitorUser, whose password
	// is Data too.
	Data string
	// Sentinel is the password of the sentinel's default user (its own
	// requirepass), which clients give as SentinelPassword.
	Sentinel string
}

// SentinelPorts are the ports of a RedisSentinel deployment.
type SentinelPorts struct{ Master, Replica, Sentinel int }

// RedisSentinel runs a Redis master, one replica of it and one Sentinel
// monitoring it under SentinelMaster (quorum 1), in one container: the
// servers reach one another at 127.0.0.1 and their ports, which are the
// addresses the sentinel reports and, published under the same numbers,
// the addresses a client on the test machine dials — also for the replica
// it promotes. downAfterMs is the sentinel's down-after-milliseconds; the
// failover timeout is five times it. Each data node writes its pid to
// SentinelPidFile(port), so a fault can reach the one process.
func RedisSentinel(image string, p SentinelPorts, downAfterMs int, auth SentinelAuth) Spec {
	var dataArgs []string
	if auth.Data != "" {
		dataArgs = append(dataArgs, "--requirepass", auth.Data,
			"--masteruser", SentinelReplicationUser, "--masterauth", auth.Data)
		for _, u := range []string{SentinelReplicationUser, SentinelMonitorUser} {
			dataArgs = append(append(dataArgs, "--user", u, "on", ">"+auth.Data), sentinelUserRules[u]...)
		}
	}
	node := func(port int, more ...string) Spec {
		sp := Redis(image, port, append(append([]string{"--pidfile", SentinelPidFile(port)}, dataArgs...), more...)...)
		sp.Services[0].Probe = func(ctx context.Context, addr string) (string, error) {
			info, err := SentinelInfo(ctx, addr, auth.Data, "replication")
			if err == nil && port == p.Replica && !strings.Contains(info, "master_link_status:up") {
				err = fmt.Errorf("replica not in sync: %q", info)
			}
			if err != nil {
				return "", err
			}
			info, err = SentinelInfo(ctx, addr, auth.Data, "server")
			return redisVersion(info), err
		}
		return sp
	}
	master := node(p.Master)
	replica := node(p.Replica, "--replicaof", "127.0.0.1", strconv.Itoa(p.Master))

	var conf strings.Builder
	fmt.Fprintf(&conf, "port %d\nbind 0.0.0.0\nprotected-mode no\ndir /tmp\n", p.Sentinel)
	if auth.Sentinel != "" {
		fmt.Fprintf(&conf, "requirepass %s\n", auth.Sentinel)
	}
	m := SentinelMaster
	fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d 1\n", m, p.Master)
	fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", m, downAfterMs)
	fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", m, 5*downAfterMs)
	fmt.Fprintf(&conf, "sentinel parallel-syncs %s 1\n", m)
	if auth.Data != "" {
		fmt.Fprintf(&conf, "sentinel auth-user %s %s\nsentinel auth-pass %s %s\n", m, SentinelMonitorUser, m, auth.Data)
	}
	// The sentinel rewrites its configuration file: it must be writable,
	// and is written by the container's shell, as ZooKeeper's zoo.cfg.
	sentinel := Spec{
		Kind:  "redis-sentinel",
		Image: image,
		Entrypoint: []string{"sh", "-c", "cat >/tmp/sentinel.conf <<'EOF'\n" + conf.String() + "EOF\n" +
			"exec redis-server /tmp/sentinel.conf --sentinel"},
		Services: []Service{{"redis-sentinel", p.Sentinel, func(ctx context.Context, addr string) (string, error) {
			// Ready once it sees the replica: a failover needs one.
			info, err := SentinelInfo(ctx, addr, auth.Sentinel, "sentinel")
			if err != nil {
				return "", err
			}
			if !strings.Contains(info, "status=ok") || !strings.Contains(info, "slaves=1") {
				return "", fmt.Errorf("sentinel does not see master and replica yet: %q", info)
			}
			return "redis-sentinel", nil
		}}},
	}
	return Combine("redis-sentinel", master, replica, sentinel)
}

// SentinelPidFile is where a RedisSentinel data node on port keeps its
// process id.
func SentinelPidFile(port int) string { return "/tmp/redis-" + strconv.Itoa(port) + ".pid" }

// SentinelInfo returns INFO section of the server at addr (a data node or
// the sentinel), logging in with password first unless it is empty.
func SentinelInfo(ctx context.Context, addr, password, section string) (string, error) {
	if password == "" {
		return redisBulk(ctx, addr, "INFO "+section)
	}
	return redisAuthBulk(ctx, addr, nil, password, "INFO", section)
}
