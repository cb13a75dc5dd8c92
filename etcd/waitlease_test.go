package etcd_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcd_WaiterLeaseDies_AcquireQueuesAgain: a blocking Acquire whose
// shared lease dies while it waits (revoked here; on a loaded server, not
// renewed in time — CI saw 8 of a 4,000-buyer crowd fail so) holds nothing
// and has lost only its place: it queues again on a new lease and gets the
// lock once the holder releases, rather than failing with ErrLeaseLost.
func TestEtcd_WaiterLeaseDies_AcquireQueuesAgain(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	raw := h.newClient(t)
	holderL := mustLocker(t, h, nil)
	waiterL := mustLocker(t, h, nil)
	ctx := ctxFor(t, time.Minute)
	held, err := holderL.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := waiterL.Acquire(ctx, "k")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	prefix := h.prefix + "k\x00"
	waitKeys(t, raw, prefix, 2)
	resp, err := raw.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoking the waiter's lease: %v", err)
	}
	// The waiter queues again behind the holder: two keys again, the
	// Acquire still waiting.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-got:
			t.Fatalf("Acquire whose waiter lease died while the lock was held = %v, want it waiting again", err)
		default:
		}
		n, err := raw.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && n.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not queue again within 10 s of its lease's death (range count %v, %v)", n, err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire whose waiter lease died while the lock was held = %v, want the lock once it was released", err)
	}
}
