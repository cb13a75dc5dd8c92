package holdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/holdtest"
	"github.com/distlock/locker/memory"
)

// A lease ends on the client when its Release returns, after the server
// has let the lock go and may already have granted it to the waiter: B can
// be granted a moment before A's Done is closed. Check must not call that
// two holders. lateDone stretches the moment (a loaded machine did it for
// a CI run of postgres's TestClockJump_ServerWallClock_LiveHolderKeepsItsLock,
// 2026-12-02); the lock itself is the memory backend's, which hands over
// correctly.
func TestCheck_GrantBetweenReleaseAndDone_IsAHandover(t *testing.T) {
	store := memory.NewStore()
	newLocker := func() locker.Locker {
		l, err := memory.New(store)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	const lag = 300 * time.Millisecond
	b := newLocker()
	holdtest.Check(t, holdtest.Scenario{
		A: lateDone{newLocker(), lag}, B: b, Key: "k",
		Options: []locker.Option{locker.WithTTL(10 * time.Second)},
		Queued:  func(t *testing.T) { waitForWaiter(t, b, "k") },
		Fault:   func(t *testing.T) {},
		Keeps:   true,
	})
}

func waitForWaiter(t *testing.T, l locker.Locker, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		info, err := locker.Inspect(ctx, l, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("B never queued")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lateDone's leases close Done lag after the lease has ended.
type lateDone struct {
	locker.Locker
	lag time.Duration
}

func (l lateDone) Acquire(ctx context.Context, key string, opts ...locker.Option) (locker.Lease, error) {
	le, err := l.Locker.Acquire(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	late := &lateLease{Lease: le, done: make(chan struct{})}
	go func() {
		<-le.Done()
		time.Sleep(l.lag)
		close(late.done)
	}()
	return late, nil
}

type lateLease struct {
	locker.Lease
	done chan struct{}
}

func (l *lateLease) Done() <-chan struct{} { return l.done }
