package redis_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// queueKeys are the waiter queue and its deadlines of key, under the
// default prefix (see the package doc).
func queueKeys(key string) (queue, deadlines string) {
	p := redis.DefaultPrefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(key)) + "}"
	return p + ":q", p + ":qd"
}

// waitQueued waits until key's queue holds n waiters.
func waitQueued(ctx context.Context, t *testing.T, c *goredis.Client, key string, n int64) {
	t.Helper()
	q, _ := queueKeys(key)
	for {
		got, err := c.ZCard(ctx, q).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("queue of %q holds %d waiters, want %d", key, got, n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// countRuns has the server at addr log every command from now on (its
// slow log, with a threshold of 0) and returns a function that says how
// many times a script of the given hash has run since, by the logged
// arguments. The server must be the test's own.
func countRuns(ctx context.Context, t *testing.T, addr, sha string) func() int {
	t.Helper()
	c := direct(t, addr)
	for _, err := range []error{
		c.ConfigSet(ctx, "slowlog-max-len", "1000000").Err(),
		c.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(),
		c.SlowLogReset(ctx).Err(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return func() int {
		t.Helper()
		log, err := c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range log {
			if len(e.Args) > 1 && strings.EqualFold(e.Args[0], "evalsha") && e.Args[1] == sha {
				n++
			}
		}
		return n
	}
}

// Waiters in separate Lockers (processes) on one key: each release wakes
// the head of the queue only, not every Locker's waiter. Counted on the
// server (its slow log, every command logged): the acquire script's runs
// during the handoffs — per handoff the new holder's, and the next head's
// one look at the new holder — where a herd would make about waiters²/2.
// The waiters' heartbeats (a script of their own, every 200 ms) are not
// counted: they grow with the handoffs' wall time, not with the herd, and a
// loaded fresh-clone run (L13, 2026-12-04), counting every script then,
// failed with 96 for 16 handoffs.
func TestRedis_Handoff_WakesOneWaiterAcrossLockers(t *testing.T) {
	const waiters = 16
	srv := testenv.RedisMasters(t, 1).Nodes[0] // its own server: its stats count only this test
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := direct(t, srv.Addr())
	const key = "herd"
	// A TTL no handoff comes near: no fallback wait ends during the test.
	ttl := locker.WithTTL(time.Minute)
	holder, err := newSingle(t, srv.Addr(), ttl).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, waiters)
	for range waiters {
		l := newSingle(t, srv.Addr(), ttl)
		go func() {
			lease, err := l.Acquire(ctx, key)
			if err == nil {
				err = lease.Release(ctx)
			}
			errs <- err
		}()
	}
	waitQueued(ctx, t, plain, key, waiters)

	count := countRuns(ctx, t, srv.Addr(), redis.AcquireScript.Hash())
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	attempts := count()
	t.Logf("%d acquire attempts for %d handoffs", attempts, waiters)
	// A herd makes about waiters/2 attempts per handoff (128 for these 16,
	// measured with a wake-all release); one woken waiter makes about two.
	if attempts > 4*waiters {
		t.Errorf("%d acquire attempts for %d handoffs between %d Lockers: waiters are woken in a herd", attempts, waiters, waiters)
	}
	q, d := queueKeys(key)
	if n, err := plain.Exists(ctx, q, d).Result(); err != nil || n != 0 {
		t.Errorf("after every waiter acquired, %d of the queue keys remain (%v)", n, err)
	}
}

// A holder with a long TTL releases; the next holder, with a short TTL,
// dies without releasing. The waiter after it must follow the new holder's
// TTL, not sleep out the PTTL it saw of the first one.
func TestRedis_HolderDiesAfterHandoff_NextWaiterFollowsItsTTL(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := direct(t, addr)
	key := "stall/" + testPrefix()
	first, err := newSingle(t, addr, locker.WithTTL(10*time.Second)).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	for i := range 2 {
		l := newSingle(t, addr, locker.WithTTL(300*time.Millisecond), locker.WithAutoRefresh(false))
		go func() {
			// Never released: the holder "dies" with its lock held, which
			// Redis frees at the 300 ms TTL.
			_, err := l.Acquire(ctx, key)
			got <- err
		}()
		waitQueued(ctx, t, plain, key, int64(i+1))
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	// Generous: a liveness bound tied to the dead holder's 300 ms TTL, far
	// below the first holder's 10 s.
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the last waiter still waits %v after a holder with a 300 ms TTL died (the first holder's TTL was 10 s)", time.Since(died))
	}
}

// A waiter that gives up leaves no entry in the queue; the waiter behind
// it is woken by the next release all the same.
func TestRedis_CancelledWaiter_LeavesNoQueueEntry(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := direct(t, addr)
	key := "cancel/" + testPrefix()
	q, d := queueKeys(key)
	holder, err := newSingle(t, addr).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	// The head gives up, the second waiter stays.
	first, second := newSingle(t, addr), newSingle(t, addr)
	wctx, wcancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := first.Acquire(wctx, key)
		gaveUp <- err
	}()
	waitQueued(ctx, t, plain, key, 1)
	got := make(chan error, 1)
	go func() {
		lease, err := second.Acquire(ctx, key)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	waitQueued(ctx, t, plain, key, 2)
	wcancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
	}
	waitQueued(ctx, t, plain, key, 1)
	if n, err := plain.HLen(ctx, d).Result(); err != nil || n != 1 {
		t.Fatalf("deadlines hold %d entries (%v), want the remaining waiter's only", n, err)
	}

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // the holder's TTL is 15 s: only the wake-up is this fast
		t.Fatal("the waiter behind a cancelled one was not woken by the release")
	}
	if n, err := plain.Exists(ctx, q, d).Result(); err != nil || n != 0 {
		t.Errorf("%d queue keys remain after every waiter left (%v)", n, err)
	}
}

// The head waiter dies (here: cut off from Redis) while a holder with a
// long TTL holds the lock; the holder releases, and the wake-up goes to the
// dead head. The next waiter must get the lock within the waiters'
// liveness (under a second) and a round trip, not at its fallback wait,
// which follows the holder's 15 s TTL.
func TestRedis_CrashedHeadWaiter_NextGetsTheLockSoon(t *testing.T) {
	srv := testenv.Redis(t)
	proxy := srv.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plain := direct(t, srv.Addr())
	key := "crashed-head/" + testPrefix()
	holder, err := newSingle(t, srv.Addr(), locker.WithTTL(15*time.Second)).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	// The head waits through the proxy, which is then cut: it neither
	// renews its entry, nor hears its wake-up, nor leaves.
	head := newSingle(t, proxy.Addr())
	headCtx, stopHead := context.WithCancel(ctx)
	headDone := make(chan struct{})
	go func() {
		defer close(headDone)
		if lease, err := head.Acquire(headCtx, key); err == nil {
			lease.Release(ctx)
		}
	}()
	defer func() { stopHead(); <-headDone }()
	waitQueued(ctx, t, plain, key, 1)
	next := newSingle(t, srv.Addr())
	got := make(chan error, 1)
	go func() {
		lease, err := next.Acquire(ctx, key)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	waitQueued(ctx, t, plain, key, 2)
	proxy.Blackhole(t)

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	// Liveness 0.7 s + a heartbeat period 0.2 s + a round trip; 5 s is room
	// for a loaded machine, far below the 13.5 s of the fallback wait.
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the next waiter got the lock %v after the release", time.Since(released))
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter behind a dead head still waits %v after the release", time.Since(released))
	}
}

// Many waiters in one Locker: at most 8 of them are in the lock's queue in
// Redis at a time (each queued waiter costs the server a heartbeat every
// 200 ms), the others wait in the process; every one of them gets the lock.
func TestRedis_ManyWaitersInOneLocker_FewQueueAtTheServer(t *testing.T) {
	const waiters = 40
	srv := testenv.RedisMasters(t, 1).Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := direct(t, srv.Addr())
	const key = "crowd"
	ttl := locker.WithTTL(time.Minute)
	holder, err := newSingle(t, srv.Addr(), ttl).Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	l := newSingle(t, srv.Addr(), ttl)
	q, _ := queueKeys(key)
	seen := make(chan int64, waiters)
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			lease, err := l.Acquire(ctx, key)
			if err != nil {
				errs <- err
				return
			}
			n, err := plain.ZCard(ctx, q).Result()
			seen <- n
			if rerr := lease.Release(ctx); err == nil {
				err = rerr
			}
			errs <- err
		}()
	}
	// Let the crowd settle: the queue stops growing (at 8 entries; all 40
	// without the bound).
	for last := int64(-1); ; {
		n, err := plain.ZCard(ctx, q).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == last && n >= 8 {
			break
		}
		last = n
		select {
		case <-ctx.Done():
			t.Fatalf("queue of %q holds %d waiters", key, n)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(seen)
	for n := range seen {
		if n > 8 {
			t.Fatalf("a waiter granted the lock saw %d entries in the queue in Redis, want at most 8 from one Locker", n)
		}
	}
}
