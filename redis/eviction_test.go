package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
)

// A server whose maxmemory-policy evicts keys may delete a held lock and
// grant it again: a Locker, a Locker opened by URL and a Guard refuse it
// unless told to accept it.
func TestRedis_EvictingPolicy_RefusedUnlessAccepted(t *testing.T) {
	srv := testenv.RedisMasters(t, 1).Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := direct(t, srv.Addr()).ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	key := "evict/" + testPrefix()

	l := newSingle(t, srv.Addr())
	if lease, err := l.TryAcquire(ctx, key); !errors.Is(err, locker.ErrInvalidOption) || !errors.Is(err, redis.ErrEvictingPolicy) {
		if err == nil {
			lease.Release(ctx)
		}
		t.Fatalf("TryAcquire on a server with maxmemory-policy volatile-lru = %v, want ErrInvalidOption and ErrEvictingPolicy", err)
	}
	if _, err := locker.Open(ctx, "redis://"+srv.Addr()+"/0"); !errors.Is(err, redis.ErrEvictingPolicy) {
		t.Fatalf("Open on a server with maxmemory-policy volatile-lru = %v, want ErrEvictingPolicy", err)
	}
	g := newGuard(t, direct(t, srv.Addr()))
	if err := g.Admit(ctx, key, 1); !errors.Is(err, redis.ErrEvictingPolicy) {
		t.Fatalf("Guard.Admit on a server with maxmemory-policy volatile-lru = %v, want ErrEvictingPolicy", err)
	}

	accepting := newSingle(t, srv.Addr(), redis.WithAcceptEviction(true))
	lease, err := accepting.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire with WithAcceptEviction(true) = %v", err)
	}
	lease.Release(ctx)
	opened, err := locker.Open(ctx, "redis://"+srv.Addr()+"/0?accept_eviction=true")
	if err != nil {
		t.Fatalf("Open with accept_eviction=true = %v", err)
	}
	opened.Close()
	if err := newGuard(t, direct(t, srv.Addr()), redis.WithGuardAcceptEviction(true)).Admit(ctx, key, 1); err != nil {
		t.Fatalf("Guard.Admit with WithGuardAcceptEviction(true) = %v", err)
	}
}
