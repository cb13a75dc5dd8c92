package redis

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// TestAcquireScript_RunTwice: a request that runs again (go-redis retries a
// command whose reply was lost) finds the lock its first run took, and gets
// the same token back; if the fence was evicted in between, a new token
// above the lost one, never 0.
func TestAcquireScript_RunTwice(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: testenv.Redis(t).Addr()})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := base{prefix: "test:" + t.Name() + ":"}
	n := b.names("key")
	req := &driver.Request{Key: "key", Owner: driver.NewOwnerID(), Label: "t", TTL: 10 * time.Second}
	keys, args := b.acquireArgs(n, req, value(req), "")
	run := func() int64 {
		t.Helper()
		ok, token, err := pair(acquireScript.Run(ctx, c, keys, args...).Result())
		if err != nil || !ok {
			t.Fatalf("acquire: granted %v, token %d, err %v", ok, token, err)
		}
		return token
	}

	first := run()
	if again := run(); again != first {
		t.Fatalf("run again: token %d, want the first run's %d", again, first)
	}
	if err := c.Del(ctx, n.fence).Err(); err != nil {
		t.Fatal(err)
	}
	if after := run(); after <= first {
		t.Fatalf("run again after the fence was lost: token %d, want > %d", after, first)
	}
	if ttl := c.PTTL(ctx, n.lock).Val(); ttl <= 0 {
		t.Fatalf("lock PTTL %v after the runs, want it held", ttl)
	}
}
