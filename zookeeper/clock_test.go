package zookeeper_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// TestClockJump_ServerWallClock_ChangesNothing: ZooKeeper times sessions on
// its monotonic clock, so a jump of its wall clock changes nothing. A holds,
// B waits; the server's clock jumps ten session timeouts ahead, then twenty
// back, each held for two timeouts: A's lease lives on (its refreshes
// succeed) and B keeps waiting; once A releases, B is granted with a larger
// token.
func TestClockJump_ServerWallClock_ChangesNothing(t *testing.T) {
	s, clock := testenv.ZooKeeperWithClock(t)
	servers, root := []string{s.Addr()}, freshRoot(t)
	a, b := dial(t, servers, root), dial(t, servers, root)
	ctx := ctxT(t, 2*time.Minute)
	held, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var token uint64
	go func() {
		l, err := b.Acquire(ctx, "k")
		if err == nil {
			token = l.Token()
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueue(t, rawConn(t, servers, nil), lockDir(root, "k"), 2)

	for _, jump := range []time.Duration{10 * testTTL, -20 * testTTL} {
		clock.Jump(t, jump)
		time.Sleep(2 * testTTL)
		if err := held.Refresh(ctx); err != nil {
			t.Fatalf("A's refresh after the server's clock jumped %v: %v", jump, err)
		}
		select {
		case err := <-got:
			t.Fatalf("B's Acquire returned (%v) while A held the lock, after a jump of %v", err, jump)
		default:
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("B's Acquire once A released: %v", err)
	}
	if token <= held.Token() {
		t.Errorf("B's token %d after A's %d, want larger", token, held.Token())
	}
}
