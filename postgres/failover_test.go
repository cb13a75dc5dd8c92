package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// A failover to an asynchronous streaming replica (issue 20): the primary
// is SIGKILLed while a holder holds a lock and has written through a
// Guard, and the replica is promoted. Mutual exclusion across a failover
// is outside the guarantee, but every token granted after it exceeds every
// token granted before — also the tail of grants that never reached the
// replica, made certain here by cutting replication before them: the
// promoted replica's sequence is behind, and only the clock floor (the
// sequence raised to the server clock in microseconds on a new server
// life, the replica's clock here) covers them. The Guard on the new
// primary refuses the stale holder's write, and the stale holder learns
// its lease is gone (by its deadline at the latest). One Locker lists both servers with
// target_session_attrs=read-write and follows the failover. In both
// modes, each on a pair of its own.
func TestPostgresFailover_TokensRiseOverTheLostTail(t *testing.T) {
	for _, m := range []postgres.Mode{postgres.ForUpdate, postgres.Advisory} {
		t.Run(m.String(), func(t *testing.T) { failover(t, postgres.WithMode(m)) })
	}
}

func failover(t *testing.T, mode locker.Option) {
	pair := testenv.PostgresWithReplica(t)
	old := newLocker(t, pair.PrimaryDSN(), mode)
	both := newLocker(t, pair.BothDSN(), mode)
	ctx := ctxT(t, 4*time.Minute)

	var highest uint64 // every token granted before the failover
	grant := func(l locker.Locker, k string) {
		t.Helper()
		lease, err := l.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("TryAcquire(%s) before the failover: %v", k, err)
		}
		highest = max(highest, lease.Token())
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Release(%s) before the failover: %v", k, err)
		}
	}
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = randomKey(fmt.Sprintf("failover%d", i))
	}
	for range 3 {
		for _, k := range keys {
			grant(old, k)
			grant(both, k)
		}
	}
	pair.WaitReplayed(t, time.Minute)
	replicated := highest

	// The tail: grants the replica never sees. A sequence logs 32 values
	// ahead of the last it hands out, so well over 32 of them.
	// A Locker opened now raises the sequence to the primary's clock on
	// its first connection, past every time the replica knows of (its
	// start, the last commit it replayed).
	pair.CutReplication(t)
	late := newLocker(t, pair.PrimaryDSN(), mode)
	for range 6 {
		for _, k := range keys {
			grant(late, k)
			grant(both, k)
		}
	}
	const ttl = 10 * time.Second
	held, err := late.TryAcquire(ctx, "res", locker.WithTTL(ttl), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	highest = max(highest, held.Token())
	oldGuard, err := postgres.NewGuard(newPool(t, pair.PrimaryDSN()))
	if err != nil {
		t.Fatal(err)
	}
	noop := func(pgx.Tx) error { return nil }
	if err := oldGuard.Write(ctx, "res", held.Token(), noop); err != nil {
		t.Fatalf("the first holder's write: %v", err)
	}
	var seen int64
	if err := adminConn(t, pair.ReplicaDSN()).QueryRow(ctx, "SELECT last_value FROM locker_locks_token").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	if uint64(seen) >= highest {
		t.Fatalf("the replica's sequence is at %d, not behind the highest token %d: no tail lost, the test proves nothing", seen, highest)
	}
	t.Logf("tokens: %d replicated, %d granted; the replica's sequence at %d", replicated, highest, seen)

	start := time.Now()
	pair.KillPrimary(t)
	pair.Promote(t, time.Minute)
	t.Logf("primary killed and replica promoted in %v", time.Since(start).Round(time.Millisecond))

	// FOR UPDATE watches the lock's connection and learns at once; the
	// advisory mode learns at the session's next statement, here none
	// (no refresh), so at the lease's deadline.
	select {
	case <-held.Done():
	case <-time.After(ttl + 20*time.Second):
		t.Errorf("the stale holder's Done not closed %v after its server was killed (TTL %v)", ttl+20*time.Second, ttl)
	}
	for _, k := range append(keys, "res") {
		lease, err := acquireAfterFailover(t, both, k)
		if err != nil {
			t.Fatalf("Acquire(%s) after the failover: %v", k, err)
		}
		if lease.Token() <= highest {
			t.Errorf("%s: token %d after the failover, not above %d granted before it", k, lease.Token(), highest)
		}
		if k != "res" {
			lease.Release(ctx)
			continue
		}
		defer lease.Release(ctx)
		guard, err := postgres.NewGuard(newPool(t, pair.BothDSN()))
		if err != nil {
			t.Fatal(err)
		}
		if err := guard.Write(ctx, "res", lease.Token(), noop); err != nil {
			t.Fatalf("the new holder's write: %v", err)
		}
		if err := guard.Write(ctx, "res", held.Token(), noop); !errors.Is(err, fencing.ErrStaleToken) {
			t.Errorf("the stale holder's write after the failover = %v, want ErrStaleToken", err)
		}
	}
	if err := held.Refresh(ctx); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("the stale holder's Refresh = %v, want ErrLeaseLost", err)
	}
}

// acquireAfterFailover acquires k, trying again, for up to 30 s, while
// the Locker finds its backend unavailable. The pool's connections to the
// dead primary no longer fail an Acquire (the backend moves to another
// connection: TestIdleConnectionsEndedByServer_NextAcquireSucceeds); the
// retries are a margin for a server that has just been promoted, and each
// one is logged.
func acquireAfterFailover(t *testing.T, l locker.Locker, k string) (locker.Lease, error) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for {
		lease, err := l.Acquire(ctx, k)
		if !errors.Is(err, locker.ErrUnavailable) || ctx.Err() != nil {
			return lease, err
		}
		t.Logf("Acquire(%s) just after the failover: %v", k, err)
		time.Sleep(100 * time.Millisecond)
	}
}
