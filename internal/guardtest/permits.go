package guardtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// Lockers makes independent Lockers of one backend, with the TTL their
// locks get, and crashes one: it stops talking to its server without
// releasing, so that its locks end on the server's own schedule (a TTL, a
// lease, a session). The conformance harnesses have these methods.
type Lockers interface {
	NewLocker(ctx context.Context, t *testing.T, opts ...locker.Option) (locker.Locker, error)
	TTL() time.Duration
	Crash(t *testing.T, l locker.Locker)
}

// Write performs one write through a guard on behalf of the permit (or
// lock) of key with token: nil if admitted and applied.
type Write func(ctx context.Context, key string, token uint64) error

// limit is the number of permits the checks ask for.
const limit = 3

// Permits checks a permit guard on key with N = 3 permits: every live
// permit's writes are admitted, also concurrently (a fence keeping the
// highest token would refuse all but the newest); a released permit's
// write is refused though its token is below the live ones; a lost permit
// (its holder crashed, and the server freed it) is refused though its
// token is above the live ones, and above every token written with.
func Permits(t *testing.T, h Lockers, key string, write Write) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leases := make([]locker.Lease, limit)
	for i := range leases {
		leases[i] = acquire(ctx, t, newLocker(ctx, t, h), key, limit, true)
	}
	var wg sync.WaitGroup
	errs := make(chan error, limit*8)
	for _, l := range leases {
		for range 8 {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- write(ctx, key, l.Token()) }()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a live permit's concurrent write was refused: %v", err)
		}
	}
	fence := fencing.NewMemory()
	if fence.Admit(ctx, key, leases[2].Token()) != nil || fence.Admit(ctx, key, leases[0].Token()) == nil {
		t.Fatal("a max-token fence admitted an older live permit after a newer one")
	}

	// Released: the oldest permit, whose token is below the live ones.
	if err := leases[0].Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustRefuse(ctx, t, write, key, leases[0].Token(), "released")
	mustAdmit(ctx, t, write, key, leases[1:]...)

	// Lost: a new holder takes the freed permit (the highest token so far)
	// and crashes; another Locker's Acquire returns once the server has
	// freed it, and gives its permit back at once, so that the lost token
	// stays the highest any write carried.
	crashed := newLocker(ctx, t, h)
	lost := acquire(ctx, t, crashed, key, limit, true)
	mustAdmit(ctx, t, write, key, lost)
	h.Crash(t, crashed)
	next := acquire(ctx, t, newLocker(ctx, t, h), key, limit, false)
	if err := next.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustRefuse(ctx, t, write, key, lost.Token(), "lost")
	mustAdmit(ctx, t, write, key, leases[1:]...)
	if lost.Token() <= leases[2].Token() {
		t.Fatalf("the lost permit's token %d is not above the live %d", lost.Token(), leases[2].Token())
	}
}

// PlainLock checks a permit guard on key held as a plain lock (N = 1)
// beside today's guard, fed the same writes: both admit the holder, and
// both refuse a crashed holder's write once a newer holder wrote. Where
// today's guard cannot tell (the holder released, nobody newer wrote), the
// permit guard refuses: it is stricter, never looser.
func PlainLock(t *testing.T, h Lockers, key string, write, today Write) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	both := func(token uint64, admitted bool, what string) {
		t.Helper()
		for name, w := range map[string]Write{"permit guard": write, "today's guard": today} {
			err := w(ctx, key, token)
			if admitted != (err == nil) || (!admitted && !errors.Is(err, fencing.ErrStaleToken)) {
				t.Fatalf("%s, %s: write with token %d = %v, admitted %v", what, name, token, err, admitted)
			}
		}
	}
	crashed := newLocker(ctx, t, h)
	a := acquire(ctx, t, crashed, key, 1, false)
	both(a.Token(), true, "the holder")
	h.Crash(t, crashed)
	b := acquire(ctx, t, newLocker(ctx, t, h), key, 1, false)
	both(b.Token(), true, "the next holder")
	both(a.Token(), false, "the crashed holder")
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustRefuse(ctx, t, write, key, b.Token(), "released lock")
}

func newLocker(ctx context.Context, t *testing.T, h Lockers) locker.Locker {
	t.Helper()
	l, err := h.NewLocker(ctx, t, locker.WithTTL(h.TTL()))
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acquire takes a permit of key (of n), at once if try, else waiting.
func acquire(ctx context.Context, t *testing.T, l locker.Locker, key string, n int, try bool) locker.Lease {
	t.Helper()
	opts := []locker.Option{locker.WithLimit(n)}
	var (
		lease locker.Lease
		err   error
	)
	if try {
		lease, err = l.TryAcquire(ctx, key, opts...)
	} else {
		lease, err = l.Acquire(ctx, key, opts...)
	}
	if err != nil {
		t.Fatalf("acquire %q: %v", key, err)
	}
	return lease
}

func mustAdmit(ctx context.Context, t *testing.T, write Write, key string, leases ...locker.Lease) {
	t.Helper()
	for _, l := range leases {
		if err := write(ctx, key, l.Token()); err != nil {
			t.Fatalf("a live permit's write (token %d) was refused: %v", l.Token(), err)
		}
	}
}

func mustRefuse(ctx context.Context, t *testing.T, write Write, key string, token uint64, what string) {
	t.Helper()
	if err := write(ctx, key, token); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("a %s permit's write (token %d) = %v, want ErrStaleToken", what, token, err)
	}
}
