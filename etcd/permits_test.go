package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcd_Permits_TwoFreedAtOnce_ThirdWaiterStillWoken: two of two permits
// freed in one txn go to the first two waiters; the second of them is
// granted without ever having been the first waiter, and must still wake
// the third, which now waits on the whole range: freeing the first's
// permit hands it to the third while the second still holds.
func TestEtcd_Permits_TwoFreedAtOnce_ThirdWaiterStillWoken(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	raw := h.newClient(t)
	const key = "permits-chain"
	lp := h.prefix + key + "\x00"
	holders := mustLocker(t, h, nil)
	for range 2 {
		if _, err := holders.TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithLimit(2)); err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
	}
	granted := make(chan locker.Lease, 3)
	for i := range 3 {
		l := mustLocker(t, h, nil)
		go func() {
			lease, err := l.Acquire(ctxFor(t, time.Minute), key, locker.WithLimit(2))
			if err != nil {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, locker.ErrClosed) {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			granted <- lease
		}()
		waitKeys(t, raw, lp, int64(i+3))
	}
	// Free both holders' keys in one txn, as two releases landing together.
	resp, err := raw.Get(ctxFor(t, 10*time.Second), lp, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Txn(ctxFor(t, 10*time.Second)).
		Then(clientv3.OpDelete(string(resp.Kvs[0].Key)), clientv3.OpDelete(string(resp.Kvs[1].Key))).Commit(); err != nil {
		t.Fatal(err)
	}
	first, second := <-granted, <-granted
	if first.Token() > second.Token() {
		first, second = second, first
	}
	if err := first.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case third := <-granted:
		_ = third.Release(ctxFor(t, 10*time.Second))
	case <-time.After(10 * time.Second):
		t.Fatal("a freed permit went to no waiter within 10 s while the third waiter waited")
	}
	_ = second.Release(ctxFor(t, 10*time.Second))
}
