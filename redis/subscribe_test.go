package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// A subscription that stalls (its connection goes to a server that no
// longer answers) must not hold up anyone: the waiter that started it
// returns when its context is cancelled, another waiter of the same Locker
// returns at its own deadline, and Close returns.
func TestRedis_StalledSubscription_BlocksNobody(t *testing.T) {
	srv := testenv.Redis(t)
	proxy := srv.Proxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Commands go straight to the server over one connection; every later
	// connection (the subscription's) goes through the proxy.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 1,
		Dialer: splitDialer(srv.Addr(), proxy.Addr())})
	l, err := redis.New(c, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := "stalled/" + testPrefix()
	holder := newSingle(t, srv.Addr(), locker.WithTTL(time.Minute))
	lease, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	warmUp(t, l)
	proxy.Blackhole(t)
	defer proxy.Heal(t)

	// The first waiter starts the subscription, which stalls; it is
	// cancelled (a context without a deadline).
	first, cancelFirst := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() {
		_, err := l.Acquire(first, key)
		firstDone <- err
	}()
	time.Sleep(200 * time.Millisecond)
	// A second waiter with a deadline of its own.
	const wait = 300 * time.Millisecond
	second, cancelSecond := context.WithTimeout(ctx, wait)
	defer cancelSecond()
	_, err = l.Acquire(second, key)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second waiter: Acquire = %v, want context.DeadlineExceeded", err)
	}
	// Returning well after its deadline is what blocking on the first
	// waiter's subscription looks like; 2 s is room for a loaded machine.
	if late := time.Since(deadlineOf(second)); late > 2*time.Second {
		t.Fatalf("second waiter returned %v after its deadline, held up by the stalled subscription", late)
	}
	cancelFirst()
	select {
	case err := <-firstDone:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("first waiter: Acquire = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("first waiter still blocked 2 s after its context was cancelled")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still blocked after 10 s on the stalled subscription")
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
