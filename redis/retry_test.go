package redis_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// A release whose reply is late is sent again by go-redis (the client's
// MaxRetries, 3 by default): the first try released the lock, the retry
// finds it gone. The lease was released, not lost. A busy script keeps the
// server from answering for longer than the client's read timeout, so that
// the tries queue up and run one after the other.
func TestRedis_ReleaseRetriedByClient_IsNotLost(t *testing.T) {
	srv := testenv.RedisMasters(t, 1).Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: 3,
		MinRetryBackoff: 300 * time.Millisecond, MaxRetryBackoff: 300 * time.Millisecond})
	l := newSingleClient(t, c, locker.WithTTL(time.Minute), locker.WithAutoRefresh(false))
	key := "retried/" + testPrefix()

	lease, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	busy := stall(t, srv.Addr(), time.Second)
	defer busy()
	start := time.Now()
	err = lease.Release(ctx)
	t.Logf("Release took %v: %v", time.Since(start), err)
	if errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Release = %v; the lock was released by the first try, want nil", err)
	}
	if err != nil {
		t.Fatalf("Release = %v, want nil", err)
	}
	if keys := lockKeys(t, srv.Addr()); len(keys) != 0 {
		t.Fatalf("lock keys left after Release: %v", keys)
	}
}

// stall keeps the server at addr busy for d with a script that spins on
// TIME, as a long command or a frozen server would (it reads nothing
// meanwhile); it returns once the script runs, and the function it returns
// waits for its end.
func stall(t testing.TB, addr string, d time.Duration) (wait func()) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: -1})
	const spin = `local t0 = redis.call('TIME')
local function us(t) return tonumber(t[1]) * 1000000 + tonumber(t[2]) end
while us(redis.call('TIME')) - us(t0) < tonumber(ARGV[1]) do end
return 1`
	done := make(chan error, 1)
	go func() { done <- c.Eval(context.Background(), spin, nil, d.Microseconds()).Err() }()
	time.Sleep(100 * time.Millisecond) // the script starts at once on an idle server
	return func() {
		if err := <-done; err != nil {
			t.Errorf("stall: %v", err)
		}
		c.Close()
	}
}

// An acquire whose connection is reset after the server ran it has an
// unknown outcome, like a timeout: the lock may be held. It is cleaned up
// by owner id before the error returns, not left for its TTL.
func TestRedis_AcquireReplyLostToReset_CleansUp(t *testing.T) {
	srv := testenv.Redis(t)
	proxy := srv.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	l := newSingleClient(t, c, locker.WithTTL(time.Minute), locker.WithAutoRefresh(false))
	key := "reset/" + testPrefix()

	warmUp(t, l) // a connection idle in the pool, the scripts cached
	proxy.ResetReplies(t)
	// Heal once the server has run the acquire (its answer is then reset),
	// so that the clean-up, which retries, gets through.
	lockName := "locker:{" + base64.RawURLEncoding.EncodeToString([]byte(key)) + "}:lock"
	plain := direct(t, srv.Addr())
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		for ctx.Err() == nil {
			if n, _ := plain.Exists(ctx, lockName).Result(); n == 1 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		proxy.Heal(t)
	}()
	defer func() { <-healed }()
	lease, err := l.TryAcquire(ctx, key)
	if err == nil {
		lease.Release(ctx)
		t.Fatal("TryAcquire succeeded through a proxy that resets every answer")
	}
	<-healed
	t.Logf("TryAcquire: %v", err)
	// Gone, or kept for at most the clean-up's 2 s from a late duplicate;
	// not held for the minute of the TTL.
	if pttl, err := plain.PTTL(ctx, lockName).Result(); err != nil || pttl > 2*time.Second {
		t.Fatalf("the failed TryAcquire left the lock held for %v more (%v), its TTL", pttl, err)
	}
}

// A clean-up holds against a late duplicate: the acquire it cleans up
// after may still be on its way to the server (here: delayed on its
// connection while the clean-up goes over another) and land after it. The
// lock must not be left held for the TTL by nobody.
func TestRedis_AcquireLandingAfterItsCleanup_HoldsNothing(t *testing.T) {
	srv := testenv.Redis(t)
	proxy := srv.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first connection goes through the proxy, every later one (the
	// clean-up's) straight to the server.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 1,
		Dialer: splitDialer(proxy.Addr(), srv.Addr())})
	l := newSingleClient(t, c, locker.WithTTL(time.Minute), locker.WithAutoRefresh(false))
	key := "late/" + testPrefix()
	warmUp(t, l) // the proxied connection, idle in the pool

	proxy.DelayRequests(t, time.Second)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := l.TryAcquire(short, key)
	cancelShort()
	t.Logf("TryAcquire: %v", err)
	if err == nil {
		t.Fatal("TryAcquire succeeded before its delayed request reached the server")
	}
	time.Sleep(1500 * time.Millisecond) // the delayed request lands
	// Free long before the TTL (a minute) the landed request asked for.
	other := newSingle(t, srv.Addr(), locker.WithTTL(time.Minute))
	wait, cancelWait := context.WithTimeout(ctx, 15*time.Second)
	defer cancelWait()
	lease, err := other.Acquire(wait, key)
	if err != nil {
		t.Fatalf("Acquire by another owner = %v: the acquire that landed after its clean-up holds the lock for its TTL", err)
	}
	lease.Release(ctx)
}

// warmUp acquires and releases a lock with l: its client has a connection
// idle in its pool, and the server has the scripts cached (a first EVALSHA
// would be answered NOSCRIPT, and only its EVAL would run).
func warmUp(t testing.TB, l locker.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := l.TryAcquire(ctx, "warm-up/"+testPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
