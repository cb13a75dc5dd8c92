package etcd_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// TestEtcd_FlashCrowd_EveryBlockingAcquireServed: 4000 blocking Acquires of
// one key through one Locker, all at once (the flash sale's shape), each
// releasing as soon as it holds the lock, are all served, and leave no key
// behind. The bound is the test's context only: a crowd must be served, not
// refused. The TTL is etcd's shortest, 1 s (a lease of 2 s), as the flash
// sale's paused buyers have: the server must keep up with its renewals.
func TestEtcd_FlashCrowd_EveryBlockingAcquireServed(t *testing.T) {
	const buyers = 4000
	h := newHarness(testenv.Etcd(t).Addr())
	raw := h.newClient(t)
	l := mustLocker(t, h, nil)
	ctx := ctxFor(t, 10*time.Minute)
	var (
		served   atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctx, "sale", locker.WithTTL(time.Second))
			if err != nil {
				fail(err)
				return
			}
			if err := lease.Release(ctx); err != nil {
				fail(err)
				return
			}
			served.Add(1)
		}()
	}
	wg.Wait()
	if n := served.Load(); n != buyers {
		t.Fatalf("%d of %d blocking Acquires served; first error: %v", n, buyers, firstErr)
	}
	waitKeys(t, raw, h.prefix+"sale\x00", 0)
}
