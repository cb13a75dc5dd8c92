package redis_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// TryAcquire over Redlock answers as on every backend: ErrLocked when a
// majority of the masters answered and did not grant (another owner holds
// the lock, or contenders split the masters: contention either way), and
// ErrUnavailable only when no majority answered. Other owners' grants are
// planted on chosen masters with the package's own acquire script and key
// names, so each case is deterministic:
//
//   - another owner on 3 of 5: ErrLocked in one round (also with the other
//     2 silent);
//   - another owner on 2 of 5, the rest free: the lock is ours;
//   - two other owners on 2 of 5 each (a split nobody can win): ErrLocked,
//     wrapping redis.ErrContended, after a few rounds, with nothing left
//     behind;
//   - another owner on 1 of 3 answering masters, 2 silent: a majority
//     answered and did not grant: ErrLocked;
//   - another owner on 1 of 2 answering masters, 3 silent: no majority
//     answered: ErrUnavailable, not ErrLocked;
//   - Acquire over a split waits until the planted grants expire, then wins.
func TestRedlock_TryAcquire_ContentionIsErrLocked(t *testing.T) {
	c := testenv.RedisMasters(t, 5)
	addrs := c.Addrs()
	const ttl = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	plant := func(t *testing.T, prefix, key, owner string, px time.Duration, idx ...int) {
		t.Helper()
		for _, i := range idx {
			plantGrant(t, ctx, addrs[i], prefix, key, owner, px)
		}
	}
	// newLocker is a Redlock over addrs with the masters at silent replaced
	// by addresses nothing listens on.
	newLocker := func(t *testing.T, prefix string, silent ...int) locker.Locker {
		t.Helper()
		as := append([]string(nil), addrs...)
		for _, i := range silent {
			as[i] = closedAddr(t)
		}
		// A generous node timeout: a loaded machine must not turn a live
		// master into a silent one and change the case under test.
		l, err := redis.NewRedlock(connectMasters(as), redis.WithPrefix(prefix), redis.CloseClients(),
			redis.WithNodeTimeout(2*time.Second), locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	noLocksOf := func(t *testing.T, prefix string, idx ...int) {
		t.Helper()
		for _, i := range idx {
			for _, k := range lockKeys(t, addrs[i]) {
				if strings.HasPrefix(k, `"`+prefix) {
					t.Errorf("master %d keeps lock key %s after a failed TryAcquire", i, k)
				}
			}
		}
	}

	t.Run("majority holder", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "other", ttl, 0, 2, 4)
		start := time.Now()
		_, err := newLocker(t, prefix).TryAcquire(ctx, "k")
		if !errors.Is(err, locker.ErrLocked) || errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("TryAcquire with another owner on 3 of 5 = %v, want ErrLocked", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("TryAcquire took %v to report a majority holder: one round should do", d)
		}
		noLocksOf(t, prefix, 1, 3)
	})

	t.Run("majority holder, 2 silent", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "other", ttl, 0, 1, 2)
		_, err := newLocker(t, prefix, 3, 4).TryAcquire(ctx, "k")
		if !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryAcquire with another owner on the 3 answering masters = %v, want ErrLocked", err)
		}
	})

	t.Run("minority holder", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "other", ttl, 1, 3)
		lease, err := newLocker(t, prefix).TryAcquire(ctx, "k")
		if err != nil {
			t.Fatalf("TryAcquire with another owner on 2 of 5, 3 free = %v, want the lock", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("split", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "a", ttl, 0, 1)
		plant(t, prefix, "k", "b", ttl, 2, 3)
		_, err := newLocker(t, prefix).TryAcquire(ctx, "k")
		if !errors.Is(err, locker.ErrLocked) || errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("TryAcquire on a split (2, 2, 1 free) = %v: every master answered, none granted a majority: want ErrLocked", err)
		}
		if !errors.Is(err, redis.ErrContended) {
			t.Fatalf("TryAcquire on a split = %v, want it to wrap redis.ErrContended", err)
		}
		noLocksOf(t, prefix, 4)
	})

	t.Run("minority holder, 2 silent", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "other", ttl, 0)
		_, err := newLocker(t, prefix, 3, 4).TryAcquire(ctx, "k")
		if !errors.Is(err, locker.ErrLocked) || errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("TryAcquire with another owner on 1 of 3 answering masters, 2 silent = %v: a majority answered and did not grant: want ErrLocked", err)
		}
		noLocksOf(t, prefix, 1, 2)
	})

	t.Run("majority silent", func(t *testing.T) {
		prefix := testPrefix()
		plant(t, prefix, "k", "other", ttl, 0)
		_, err := newLocker(t, prefix, 2, 3, 4).TryAcquire(ctx, "k")
		if errors.Is(err, locker.ErrLocked) || !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("TryAcquire with another owner on 1 of 2 answering masters, 3 silent = %v: no majority answered: want ErrUnavailable", err)
		}
		noLocksOf(t, prefix, 1)
	})

	t.Run("Acquire over a split", func(t *testing.T) {
		prefix := testPrefix()
		const px = 1500 * time.Millisecond
		start := time.Now() // the planted grants expire at least px after this
		plant(t, prefix, "k", "a", px, 0, 1)
		plant(t, prefix, "k", "b", px, 2, 3)
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		lease, err := newLocker(t, prefix).Acquire(actx, "k")
		if err != nil {
			t.Fatalf("Acquire over a split that expires in %v = %v", px, err)
		}
		if d := time.Since(start); d < px {
			t.Errorf("Acquire won after %v, before the planted grants expired (%v)", d, px)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// keyNames are the lock and fence keys of key under prefix, as the package
// names them.
func keyNames(prefix, key string) (lock, fence string) {
	p := prefix + "{" + base64.RawURLEncoding.EncodeToString([]byte(key)) + "}"
	return p + ":lock", p + ":fence"
}

// plantGrant grants key to owner on the master at addr, as that owner's
// acquire round would have, with a PX of px, and returns the token.
func plantGrant(t testing.TB, ctx context.Context, addr, prefix, key, owner string, px time.Duration) int64 {
	t.Helper()
	lock, fence := keyNames(prefix, key)
	val := owner + " planted"
	v, err := redis.AcquireScript.Run(ctx, direct(t, addr), []string{lock, fence},
		fmt.Sprintf("%d:%s", len(val), val), px.Milliseconds(), "").Int64()
	if err != nil || v < 1 { // a grant replies with its token
		t.Fatalf("planting %s on %s: %v %v", owner, addr, v, err)
	}
	return v
}

// A round's undo goes only to the masters where the round's request may
// have run: one that refused the connection was never sent it, and undoing
// there only spends another dial. With every master refusing, each of the
// rounds of a TryAcquire dials each master at most once: 15 dials at most,
// where an undo would make 30. (The undo used to dial them all again, and
// TryAcquire on unreachable masters took about twice as long: up to 3.4 s,
// over the 3 s the conformance suite allows.) Fewer is no fault: a CI run
// at load 16 counted 12, some master not dialled within a round's node
// timeout.
func TestRedlock_RefusedMasters_NoUndo(t *testing.T) {
	var dials atomic.Int32
	cs := make([]goredis.UniversalClient, 5)
	for i := range cs {
		addr := closedAddr(t)
		cs[i] = goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}})
	}
	l, err := redis.NewRedlock(cs, redis.WithPrefix(testPrefix()), redis.CloseClients(), redis.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire on refusing masters = %v, want ErrUnavailable", err)
	}
	if n := dials.Load(); n < 5 || n > 3*5 {
		t.Fatalf("TryAcquire on 5 refusing masters dialled %d times, want 5 to 15: up to 3 rounds, no undo", n)
	}
}

// A TryAcquire refused by a majority holder undoes the grants its round got
// elsewhere; a master whose undo does not get through keeps the grant —
// refusing others while nobody they can see holds the key — until settle
// removes it in the background or it expires. ErrLocked would tell the
// caller that the attempt left nothing behind: the outcome is ambiguous,
// so the TryAcquire answers ErrUnavailable, as ZooKeeper's does.
//
// Another owner holds masters 0 and 1 of 3; master 2 grants the attempt,
// and its connections drop every request of release.lua, the undo, until
// the test lets them through.
func TestRedlock_TryAcquireRefused_UndoNotThrough_UnavailableNotLocked(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	addrs := c.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := "test:" + t.Name() + ":" + time.Now().Format("150405.000000") + ":"
	plantGrant(t, ctx, addrs[0], prefix, "k", "other", time.Minute)
	plantGrant(t, ctx, addrs[1], prefix, "k", "other", time.Minute)
	var dropUndo atomic.Bool
	dropUndo.Store(true)
	sha := []byte(redis.ReleaseScript.Hash())
	clients := connectMasters(addrs)
	clients[2] = goredis.NewClient(&goredis.Options{Addr: addrs[2], ContextTimeoutEnabled: true, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &undoDropper{Conn: conn, drop: &dropUndo, sha: sha}, nil
		}})
	l, err := redis.NewRedlock(clients, redis.WithPrefix(prefix), redis.CloseClients(),
		redis.WithNodeTimeout(time.Second), locker.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	lease, err := l.TryAcquire(ctx, "k")
	if err == nil {
		lease.Release(ctx)
		t.Fatal("TryAcquire granted while another owner holds 2 of 3 masters")
	}
	lock, _ := keyNames(prefix, "k")
	if n, gerr := direct(t, addrs[2]).Exists(ctx, lock).Result(); gerr != nil || n != 1 {
		t.Fatalf("master 2 holds no grant of the attempt (%d, %v) when its TryAcquire returned: the undo was not held back", n, gerr)
	}
	switch {
	case errors.Is(err, locker.ErrLocked):
		t.Fatalf("TryAcquire = %v, while master 2 still holds its grant: want ErrUnavailable, not ErrLocked (which says nothing was left behind)", err)
	case !errors.Is(err, locker.ErrUnavailable):
		t.Fatalf("TryAcquire = %v, while master 2 still holds its grant: want ErrUnavailable", err)
	}
	t.Logf("TryAcquire, its grant still on master 2: %v", err)

	// Let through, settle removes the grant well before its 30 s TTL.
	dropUndo.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := direct(t, addrs[2]).Exists(ctx, lock).Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("master 2 still holds the refused attempt's grant (%d, %v) 20 s after its undo could get through", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// undoDropper drops, while drop is set, every request that runs
// release.lua by its hash (sha): it seems sent, and no answer comes.
type undoDropper struct {
	net.Conn
	drop *atomic.Bool
	sha  []byte
}

func (c *undoDropper) Write(b []byte) (int, error) {
	if c.drop.Load() && bytes.Contains(b, c.sha) {
		return len(b), nil
	}
	return c.Conn.Write(b)
}
