package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// Redlock's inspection is a majority view: with one master of five paused
// (it never answers), a lock held on the other four is held, with its
// holder's label and token; List lists it once; after its release (on four
// masters: the paused one still holds it) it is free. A lock an owner holds
// on two masters only is no lock: free while all five answer, and
// undecided while the paused master could make those two a majority.
func TestRedlock_OneMasterPaused_MajorityView(t *testing.T) {
	c := testenv.RedisMasters(t, 5)
	prefix := testPrefix()
	newLocker := func(opts ...locker.Option) locker.Locker {
		t.Helper()
		l, err := redis.NewRedlock(connectMasters(c.Addrs()), append(opts, redis.WithPrefix(prefix), redis.CloseClients(), redis.WithNodeTimeout(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	holder, observer := newLocker(locker.WithOwner("holder")), newLocker()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	lease, err := holder.TryAcquire(ctx, "k", locker.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The minority lock: an owner value on masters 1 and 2 only, as a
	// failed round leaves it until its undo.
	for _, i := range []int{1, 2} {
		m := goredis.NewClient(&goredis.Options{Addr: c.Addrs()[i]})
		err := m.Set(ctx, prefix+"{bWlub3JpdHk}:lock", "0123456789abcdef0123456789abcdef x", 30*time.Second).Err() // base64url("minority")
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if info, err := locker.Inspect(ctx, observer, "minority"); err != nil || info.Held {
		t.Fatalf("Inspect of a lock on 2 masters of 5 = %+v, %v; want free", info, err)
	}

	c.Nodes[0].Pause(t)
	defer c.Nodes[0].Unpause(t)
	info, err := locker.Inspect(ctx, observer, "k")
	if err != nil || !info.Held || info.Owner != "holder" || info.Token != lease.Token() || info.TTL <= 0 || info.TTL > 30*time.Second || info.Granted.IsZero() {
		t.Fatalf("Inspect with master 0 paused = %+v, %v; want held by holder, token %d, TTL in (0, 30s], a grant time", info, err, lease.Token())
	}
	if _, err := locker.Inspect(ctx, observer, "minority"); err == nil {
		t.Fatal("Inspect of a lock on 2 masters with a third silent: no error; nobody can tell whether it is held")
	}
	n := 0
	for info, err := range locker.List(ctx, observer, "") {
		if err != nil {
			t.Fatalf("List with master 0 paused: %v", err)
		}
		if info.Key != "k" || info.Token != lease.Token() {
			t.Fatalf("List with master 0 paused yielded %+v", info)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("List with master 0 paused yielded %d locks, want k once", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release on 4 masters of 5: %v", err)
	}
	if info, err := locker.Inspect(ctx, observer, "k"); err != nil || info.Held {
		t.Fatalf("Inspect after the release, master 0 paused and still holding it = %+v, %v; want free", info, err)
	}
}
