package testenv

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
)

// RedisSecure returns a redis-server 7.0 private to the calling test, its
// default user protected by password (the administrator, who makes the
// tests' ACL users), speaking TLS only when tl is not nil.
func RedisSecure(t testing.TB, password string, tl *launch.RedisTLS) *Server {
	t.Helper()
	return Private(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img Images, port int) launch.Spec {
		return launch.RedisSecure(img.Server, port, password, tl)
	})
}

// RedisSecureMasters returns independent Redis masters, for Redlock, one
// per password: master i's default user needs passwords[i].
func RedisSecureMasters(t testing.TB, passwords []string) *Cluster {
	t.Helper()
	return newCluster(t, "redis", len(passwords), false, func(img Images, i int, ports []int) launch.Spec {
		return launch.RedisSecure(img.Server, ports[i], passwords[i], nil)
	})
}

// RedisSecureCluster is RedisCluster with every node's default user
// protected by password (the administrator: ACL users are per node, so a
// test makes its users on every node).
func RedisSecureCluster(t testing.TB, password string) *Cluster {
	t.Helper()
	c := newCluster(t, "redis", 3, true, func(img Images, i int, ports []int) launch.Spec {
		return launch.RedisSecure(img.Server, ports[i], password, nil,
			"--masterauth", password,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "/tmp/nodes.conf",
			"--cluster-node-timeout", "5000",
			"--cluster-require-full-coverage", "no",
			"--cluster-announce-hostname", "127.0.0.1",
			"--cluster-preferred-endpoint-type", "hostname")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"redis-cli", "--no-auth-warning", "-a", password, "--cluster", "create"}
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
		if err := poll(30*time.Second, func(ctx context.Context) error { return launch.RedisAuthClusterOK(ctx, s.Addr(), password) }); err != nil {
			t.Fatalf("testenv: redis cluster member %d: %v", i+1, err)
		}
	}
	return c
}
