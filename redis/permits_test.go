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

// Waiters for the permits of one key, in separate Lockers: a freed permit
// wakes one waiter, not all of them. Counted on the server as the lock's
// handoff test counts (queue_test.go): the permit script's runs during
// the handoffs are the acquire attempts (heartbeats not counted), where a
// herd would make about waiters²/2.
func TestRedis_Permits_FreedPermitWakesOneWaiter(t *testing.T) {
	const waiters, n = 16, 3
	srv := testenv.RedisMasters(t, 1).Nodes[0] // its own server: its stats count only this test
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := direct(t, srv.Addr())
	const key = "herd-permits"
	// A TTL no handoff comes near: no fallback wait ends during the test.
	opts := []locker.Option{locker.WithTTL(time.Minute), locker.WithLimit(n)}
	var held []locker.Lease
	for range n {
		lease, err := newSingle(t, srv.Addr()).TryAcquire(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	errs := make(chan error, waiters)
	for range waiters {
		l := newSingle(t, srv.Addr())
		go func() {
			lease, err := l.Acquire(ctx, key, opts...)
			if err == nil {
				err = lease.Release(ctx)
			}
			errs <- err
		}()
	}
	waitQueued(ctx, t, plain, key, waiters)

	count := countRuns(ctx, t, srv.Addr(), redis.PermitScript.Hash())
	for _, h := range held {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	attempts := count()
	t.Logf("%d acquire attempts for %d permits handed over", attempts, waiters)
	if attempts > 4*waiters {
		t.Errorf("%d acquire attempts for %d permits handed over between %d Lockers: waiters are woken in a herd", attempts, waiters, waiters)
	}
	q, d := queueKeys(key)
	if k, err := plain.Exists(ctx, q, d).Result(); err != nil || k != 0 {
		t.Errorf("after every waiter acquired, %d of the queue keys remain (%v)", k, err)
	}
}

// A plain lock and an N-permit lock of one key refuse each other: the
// limit is stored with the key.
func TestRedis_Permits_PlainLockOnPermitKey_ErrInvalidOption(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newSingle(t, addr)
	key := "mixed/" + testPrefix()
	lock, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, key, locker.WithLimit(2)); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("permit of a key held as a plain lock = %v, want ErrInvalidOption", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	permit, err := l.TryAcquire(ctx, key, locker.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if permit.Token() <= lock.Token() {
		t.Errorf("the permit's token %d is not above the lock's %d: they share the key's fence", permit.Token(), lock.Token())
	}
	if _, err := l.Acquire(ctx, key); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("Acquire of a key held as an N-permit lock = %v, want ErrInvalidOption", err)
	}
	if err := permit.Release(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := locker.Inspect(ctx, l, key)
	if err != nil || info.Held {
		t.Fatalf("Inspect after the last permit's release = %+v, %v; want free", info, err)
	}
}

// A refresh inside the minimum hold never moves the lock's end on the
// server before the hold's end (a PEXPIRE of the TTL alone would): for a
// lock and for a permit.
func TestRedis_MinHold_RefreshKeepsHoldEnd(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newSingle(t, addr)
	for _, limit := range []int{1, 2} {
		key := "hold/" + testPrefix()
		lease, err := l.TryAcquire(ctx, key, locker.WithTTL(time.Second), locker.WithMinHold(time.Hour),
			locker.WithLimit(limit), locker.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := locker.Inspect(ctx, l, key)
		if err != nil {
			t.Fatal(err)
		}
		// The hold ends an hour after the grant: far more than any delay.
		if !info.Held || info.TTL < 30*time.Minute {
			t.Errorf("limit %d: after a refresh inside a minimum hold of 1h, TTL 1s: %+v, want held for most of the hour", limit, info)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err := locker.Inspect(ctx, l, key); err != nil || !info.Held || info.TTL < 30*time.Minute {
			t.Errorf("limit %d: after a release inside a minimum hold of 1h: %+v, %v; want held for most of the hour", limit, info, err)
		}
	}
}
