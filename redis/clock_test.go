package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
)

// TestRedis_ServerClockJumps_TokensRiseAndTheFenceHolds: Redis expires keys
// by its wall clock. A forward jump past the TTL frees a held lock early —
// outside the mutual-exclusion guarantee, as the package doc says — but the
// next holder's token is larger and the fence refuses the old holder's
// write. A jump back does not take the tokens back: the fence key's counter
// carries them past the clock.
func TestRedis_ServerClockJumps_TokensRiseAndTheFenceHolds(t *testing.T) {
	s, clock := testenv.RedisWithClock(t)
	a, b := newSingle(t, s.Addr()), newSingle(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 10 * time.Second
	guard := fencing.NewMemory()

	old, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Admit(ctx, "r", old.Token()); err != nil {
		t.Fatal(err)
	}
	clock.Jump(t, 10*ttl)
	next, err := b.TryAcquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire after the server's clock jumped 10 TTLs past a held lock = %v; want the lock (Redis expired it)", err)
	}
	if next.Token() <= old.Token() {
		t.Fatalf("token %d after the jump, not above the held lock's %d", next.Token(), old.Token())
	}
	if err := guard.Admit(ctx, "r", next.Token()); err != nil {
		t.Fatal(err)
	}
	if err := guard.Admit(ctx, "r", old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("the old holder's write after the new holder's = %v, want ErrStaleToken", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Jump(t, -time.Hour) // now 100 s behind the clock the tokens came from, and more
	for range 3 {
		l, err := b.Acquire(ctx, "k", locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= next.Token() {
			t.Fatalf("token %d after the clock went back an hour, not above %d issued before", l.Token(), next.Token())
		}
		next = l
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
