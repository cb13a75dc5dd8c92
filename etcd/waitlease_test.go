package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
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

// TestEtcd_WaiterLeaseDiesAsItIsGranted_AcquireQueuesAgain: the waiter's
// shared lease dies between the re-check that grants it the lock and the
// grant's registration with that lease. The Acquire still holds nothing —
// no lease was handed out — so it queues again, as a waiter whose lease dies
// earlier does, rather than failing with ErrLeaseLost. (CI saw one of a
// 4,000-buyer crowd fail so, "lease lost: … not renewed for 2s", on
// 2026-12-03.)
//
// The waiter's answers are delayed by 2 s, so its renewals (each given a
// third of the 1 s between its TTL of 2 s and its lease's 3 s) all time out
// and the client holds the lease dead about 3 s after the delay began. The
// holder releases at once: the news reaches the waiter about 2 s after the
// delay began, and the answer of the re-check it then sends about 4 s
// after, when the lease is dead.
func TestEtcd_WaiterLeaseDiesAsItIsGranted_AcquireQueuesAgain(t *testing.T) {
	const (
		ttl   = 2 * time.Second
		delay = 2 * time.Second
	)
	srv := testenv.Etcd(t)
	proxy := srv.Proxy(t)
	h := newHarness(srv.Addr())
	holderL := mustLocker(t, h, nil)
	waiterL := mustLocker(t, h, []string{proxy.Addr()}, etcd.WithRequestTimeout(time.Minute))
	ctx := ctxFor(t, 2*time.Minute)
	held, err := holderL.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := waiterL.Acquire(ctx, "k", locker.WithTTL(ttl))
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	waitKeys(t, h.newClient(t), h.prefix+"k\x00", 2)
	proxy.Latency(t, delay)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Past the re-check's answer, the delay ends; until then and after, the
	// Acquire must not fail.
	select {
	case err := <-got:
		t.Fatalf("Acquire whose lease died as it was granted = %v during the delay, want it waiting again", err)
	case <-time.After(2*delay + 2*time.Second):
	}
	proxy.Heal(t)
	if err := <-got; err != nil {
		t.Fatalf("Acquire whose lease died as it was granted = %v, want the lock once answers came on time", err)
	}
}

// TestEtcd_LeaseDeadOnServerOnly_AcquireTakesANewOne: the shared lease is
// gone on the server (revoked here; in CI's flash crowd of 2026-12-03, not
// renewed in time) while the client still holds it alive, its next renewal
// seconds away. An Acquire's create txn then fails "requested lease not
// found": nothing was written, the Acquire held nothing, and a blocking
// Acquire takes a new lease and goes on rather than failing unavailable.
func TestEtcd_LeaseDeadOnServerOnly_AcquireTakesANewOne(t *testing.T) {
	// A TTL of 60 s gives a reserve of 12 s, renewed every 4 s: the test's
	// Acquire comes long before the client could learn of the revoke.
	ttl := locker.WithTTL(time.Minute)
	h := newHarness(testenv.Etcd(t).Addr())
	raw := h.newClient(t)
	l := mustLocker(t, h, nil)
	ctx := ctxFor(t, time.Minute)
	held, err := l.Acquire(ctx, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := raw.Get(ctx, h.prefix+"a\x00", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the holder's key: %v, %v", resp, err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoking the shared lease: %v", err)
	}
	lease, err := l.Acquire(ctx, "b", ttl)
	if err != nil {
		t.Fatalf("Acquire on a lease the server no longer has = %v, want the lock on a new lease", err)
	}
	_ = held.Release(ctx) // lost with its lease; the error is not the point

	// A TryAcquire makes one attempt: it fails unavailable, and the next
	// one has a new lease rather than the same answer until a renewal.
	resp, err = raw.Get(ctx, h.prefix+"b\x00", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the new holder's key: %v, %v", resp, err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoking the new shared lease: %v", err)
	}
	if _, err := l.TryAcquire(ctx, "c", ttl); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire on a lease the server no longer has = %v, want ErrUnavailable", err)
	}
	again, err := l.TryAcquire(ctx, "c", ttl)
	if err != nil {
		t.Fatalf("the next TryAcquire = %v, want the lock on a new lease", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_ = lease.Release(ctx)
}
