package redis_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

func TestGuard_AdmitsInTokenOrder_RefusesStale(t *testing.T) {
	g := newGuard(t, direct(t, testenv.Redis(t).Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := "guard/" + testPrefix() + "{odd} \x00 key"

	if err := g.Admit(ctx, res, 0); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(0) = %v, want ErrStaleToken", err)
	}
	for _, tok := range []uint64{5, 5, 9, 1 << 60, math.MaxUint64} {
		if err := g.Write(ctx, res, tok, "v"); err != nil {
			t.Fatalf("Write(%d) = %v, want admitted", tok, err)
		}
	}
	// MaxUint64-1 differs from MaxUint64 only past a double's precision.
	for _, tok := range []uint64{1, 9, 1 << 60, math.MaxUint64 - 1} {
		if err := g.Admit(ctx, res, tok); !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("Admit(%d) after MaxUint64 = %v, want ErrStaleToken", tok, err)
		}
	}
	if err := g.Write(ctx, res, 7, "stale"); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale Write = %v, want ErrStaleToken", err)
	}
	v, highest, found, err := g.Get(ctx, res)
	if err != nil || !found || v != "v" || highest != math.MaxUint64 {
		t.Fatalf("Get = %q, %d, %v, %v; want \"v\", MaxUint64, true, nil", v, highest, found, err)
	}
	// Another resource is independent.
	if err := g.Admit(ctx, res+"/other", 1); err != nil {
		t.Fatalf("Admit on another resource = %v", err)
	}
}

// newGuard returns a Guard over c, failing t if NewGuard refuses.
func newGuard(t testing.TB, c goredis.UniversalClient, opts ...redis.GuardOption) *redis.Guard {
	t.Helper()
	g, err := redis.NewGuard(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A Guard's keys and a Locker's never share a name, whatever the Locker's
// prefix: a Locker whose prefix would put its keys in the Guard's key space
// ("locker:guard:") is refused, or the lock's fence would be the Guard's.
func TestGuard_KeySpaceDisjointFromLockers(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "guarded/" + testPrefix()
	l, err := redis.New(direct(t, addr), redis.WithPrefix(redis.DefaultPrefix+"guard:"))
	if errors.Is(err, locker.ErrInvalidOption) {
		return // refused: the key spaces cannot meet
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	g := newGuard(t, direct(t, addr))
	if err := g.Admit(ctx, key, 1); err != nil {
		t.Fatalf("Admit(1) on a fresh resource = %v: the Guard's fence is the lock's (token %d)", err, lease.Token())
	}
}
