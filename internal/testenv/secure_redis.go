package testenv

import (
	"testing"

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
