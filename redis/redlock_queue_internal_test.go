package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/distlock/locker/internal/testenv"
)

// A waiter that wins its round on a majority leaves the queues of the
// masters that did not grant it too: left there, its entry would take the
// wake-ups of the lock's next releases on those masters (to nobody) until
// it went stale, while the waiter behind it slept out its holder's TTL —
// which made 8 contending Lockers take a minute for 192 handoffs.
//
// The third master holds the lock for someone else (a key set by hand), so
// A holds it on the other two; W queues on all three while A holds, and
// wins on the two when A releases.
func TestRedlock_WaiterThatWins_LeavesEveryMastersQueue(t *testing.T) {
	cl := testenv.RedisMasters(t, 3)
	addrs := cl.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := "test:" + t.Name() + ":" + time.Now().Format("150405.000000") + ":"
	clients := func() []goredis.UniversalClient {
		cs := make([]goredis.UniversalClient, len(addrs))
		for i, a := range addrs {
			cs[i] = goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true})
			t.Cleanup(func() { cs[i].Close() })
		}
		return cs
	}
	n := (&base{prefix: prefix}).names("k")
	third := clients()[2]
	if err := third.Set(ctx, n.lock, "someone else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	a, err := NewRedlock(clients(), WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	w, err := NewRedlock(clients(), WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	held, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("A's Acquire (2 of 3 masters free): %v", err)
	}
	won := make(chan error, 1)
	go func() {
		lease, err := w.Acquire(ctx, "k")
		if err == nil {
			err = lease.Release(ctx)
		}
		won <- err
	}()
	for third.ZCard(ctx, n.queue).Val() == 0 {
		if ctx.Err() != nil {
			t.Fatal("W never queued on the third master")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatalf("W's Acquire after A's release: %v", err)
	}
	if q := third.ZRange(ctx, n.queue, 0, -1).Val(); len(q) != 0 {
		t.Errorf("after W won on the other two masters, the third still queues %v: W's entry was left behind", q)
	}
}
