package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/guardtest"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
)

// permitWriter writes the token as key's guarded value through a
// PermitGuard on a client of its own.
func permitWriter(t *testing.T, h *harness, connect func([]string) []goredis.UniversalClient) (guardtest.Write, *redis.PermitGuard) {
	c := connect(h.addrs)[0]
	t.Cleanup(func() { _ = c.Close() })
	g, err := redis.NewPermitGuard(c, redis.WithPermitGuardPrefix(h.prefix))
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, key string, token uint64) error {
		return g.Write(ctx, key, token, strconv.FormatUint(token, 10))
	}, g
}

func TestPermitGuard_AdmitsLivePermits_RefusesReleasedAndLost(t *testing.T) {
	h := newHarness([]string{testenv.Redis(t).Addr()}, false, connectSingle)
	write, _ := permitWriter(t, h, connectSingle)
	guardtest.Permits(t, h, "job", write)
}

func TestPermitGuard_Cluster_AdmitsLivePermits_RefusesReleasedAndLost(t *testing.T) {
	h := newHarness(testenv.RedisCluster(t).Addrs(), false, connectCluster)
	write, _ := permitWriter(t, h, connectCluster)
	guardtest.Permits(t, h, "job", write)
}

func TestPermitGuard_PlainLock_AsTodaysGuard(t *testing.T) {
	h := newHarness([]string{testenv.Redis(t).Addr()}, false, connectSingle)
	write, _ := permitWriter(t, h, connectSingle)
	c := connectSingle(h.addrs)[0]
	t.Cleanup(func() { _ = c.Close() })
	today := newGuard(t, c, redis.WithGuardPrefix(h.prefix))
	guardtest.PlainLock(t, h, "job", write, func(ctx context.Context, key string, token uint64) error {
		return today.Admit(ctx, key, token)
	})
}

func TestPermitGuard_RefusedWriteLeavesTheValue(t *testing.T) {
	h := newHarness([]string{testenv.Redis(t).Addr()}, false, connectSingle)
	write, g := permitWriter(t, h, connectSingle)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := h.NewLocker(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, "job", lease.Token()); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Write(ctx, "job", lease.Token(), "late"); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("a released lock's write = %v, want ErrStaleToken", err)
	}
	if v, found, err := g.Get(ctx, "job"); err != nil || !found || v != strconv.FormatUint(lease.Token(), 10) {
		t.Fatalf("Get = %q, %v, %v; want the holder's value", v, found, err)
	}
}
