package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// A Redis without persistence forgets every counter when it restarts; the
// clock floor must still keep every later token above every earlier one.
func TestRedis_RestartWithoutPersistence_TokensKeepIncreasing(t *testing.T) {
	srv := testenv.RedisMasters(t, 1).Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newSingle(t, srv.Addr(), locker.WithTTL(time.Minute))

	keys := []string{"a", "b", "c"}
	var highest uint64
	for _, k := range keys {
		// Advance the counter past its first value, then keep the lock held
		// across the restart.
		for range 3 {
			lease, err := l.Acquire(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			highest = max(highest, lease.Token())
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lease, err := l.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		highest = max(highest, lease.Token())
	}

	srv.Kill(t)
	srv.Restart(t)

	for _, k := range keys {
		// The held locks went with the data: each key is free at once.
		lease, err := l.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("TryAcquire(%q) after restart: %v", k, err)
		}
		if lease.Token() <= highest {
			t.Errorf("key %q: token %d after the restart, not above %d issued before it", k, lease.Token(), highest)
		}
	}
}

// Redlock over 5 masters keeps working with 2 paused: 3 still make a
// majority, and tokens still increase.
func TestRedlock_TwoOfFivePaused_StillAcquires(t *testing.T) {
	c := testenv.RedisMasters(t, 5)
	l := newRedlock(t, c.Addrs())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	last := lease.Token()
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Nodes[1].Pause(t)
	c.Nodes[3].Pause(t)
	defer c.Nodes[1].Unpause(t)
	defer c.Nodes[3].Unpause(t)

	for i := range 5 {
		lease, err := l.Acquire(ctx, "k")
		if err != nil {
			t.Fatalf("acquire %d with 2 of 5 masters paused: %v", i, err)
		}
		if lease.Token() <= last {
			t.Fatalf("acquire %d: token %d after %d", i, lease.Token(), last)
		}
		last = lease.Token()
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release %d with 2 of 5 masters paused: %v", i, err)
		}
	}
}

// With 3 of 5 masters paused no majority can answer: Acquire says so with
// ErrUnavailable before its deadline, and leaves no lock on the masters it
// reached.
func TestRedlock_ThreeOfFivePaused_FailsUnavailable_LeavesNoKey(t *testing.T) {
	c := testenv.RedisMasters(t, 5)
	l := newRedlock(t, c.Addrs())
	for _, i := range []int{0, 2, 4} {
		c.Nodes[i].Pause(t)
		defer c.Nodes[i].Unpause(t)
	}

	const deadline = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := l.Acquire(ctx, "k")
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Acquire with 3 of 5 masters paused = %v, want ErrUnavailable", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Acquire returned after its deadline (%v): %v", time.Since(start), err)
	}
	if _, err := l.TryAcquire(context.Background(), "k"); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire with 3 of 5 masters paused = %v, want ErrUnavailable", err)
	}
	for _, i := range []int{1, 3} {
		if locks := lockKeys(t, c.Nodes[i].Addr()); len(locks) != 0 {
			t.Errorf("master %d keeps lock keys %v after the failed acquisitions", i, locks)
		}
	}
}

// A holder cut off from Redis by a partition loses its lease at its
// deadline; another client then acquires with a larger token, and the Redis
// guard refuses the cut-off holder's late write.
func TestRedis_PartitionedHolder_DoneFires_StaleWriteRefused(t *testing.T) {
	srv := testenv.Redis(t)
	proxy := srv.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = time.Second
	key := "partitioned/" + testPrefix()

	cut := newSingle(t, proxy.Addr(), locker.WithTTL(ttl), locker.WithAutoRefresh(true))
	other := newSingle(t, srv.Addr(), locker.WithTTL(ttl))
	guard := newGuard(t, direct(t, srv.Addr()))

	old, err := cut.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Write(ctx, key, old.Token(), "from the first holder"); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(t)
	defer proxy.Heal(t)

	select {
	case <-old.Done():
	case <-time.After(ttl + time.Second):
		t.Fatalf("Done did not fire by the deadline %v of the partitioned holder", old.Deadline())
	}
	if !errors.Is(old.Err(), locker.ErrLeaseLost) {
		t.Fatalf("partitioned lease ended with %v, want ErrLeaseLost", old.Err())
	}

	lease, err := other.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if lease.Token() <= old.Token() {
		t.Fatalf("new holder's token %d is not above the partitioned holder's %d", lease.Token(), old.Token())
	}
	if err := guard.Write(ctx, key, lease.Token(), "from the second holder"); err != nil {
		t.Fatal(err)
	}
	// The partitioned holder wakes up and writes with its old token.
	if err := guard.Write(ctx, key, old.Token(), "stale"); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale write = %v, want ErrStaleToken", err)
	}
	if v, _, _, err := guard.Get(ctx, key); err != nil || v != "from the second holder" {
		t.Fatalf("value = %q, %v; want the second holder's", v, err)
	}
}

// newSingle returns a Locker over a fresh client of addr, closed with t.
func newSingle(t testing.TB, addr string, opts ...locker.Option) locker.Locker {
	t.Helper()
	return newSingleClient(t, goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true}), opts...)
}

// newSingleClient returns a Locker over c, closed (with c) with t.
func newSingleClient(t testing.TB, c goredis.UniversalClient, opts ...locker.Option) locker.Locker {
	t.Helper()
	l, err := redis.New(c, append([]locker.Option{redis.CloseClients()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newRedlock returns a Redlock Locker over fresh clients of addrs.
func newRedlock(t testing.TB, addrs []string, opts ...locker.Option) locker.Locker {
	t.Helper()
	l, err := redis.NewRedlock(connectMasters(addrs), append([]locker.Option{redis.CloseClients()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// direct returns a plain client of addr, closed with t.
func direct(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// lockKeys lists the lock keys (not the fences, which stay by design) on
// the server at addr.
func lockKeys(t testing.TB, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := direct(t, addr).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var locks []string
	for _, k := range keys {
		if strings.HasSuffix(k, ":lock") {
			locks = append(locks, fmt.Sprintf("%q", k))
		}
	}
	return locks
}
