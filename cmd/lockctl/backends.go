package main

// The backends lockctl can reach by URL. Each registers its scheme with
// locker.Register in init; a scheme missing here is reported by locker.Open
// as unknown ("forgotten import?").
import (
	_ "github.com/distlock/locker/etcd"
	_ "github.com/distlock/locker/memory"
	_ "github.com/distlock/locker/postgres"
	"github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
	goredis "github.com/redis/go-redis/v9"
)

// go-redis logs through a process-wide logger of its own, to stderr: its
// lines (a failed dial, four times over) would come before lockctl's own
// one-line error, which already says what failed.
func init() { goredis.SetLogger(redis.GoRedisLogger(nil)) }
