package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type acquired struct {
	lease locker.Lease
	err   error
}

func acquireAsync(ctx context.Context, l locker.Locker, key string, opts ...locker.Option) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(ctx, key, opts...)
		ch <- acquired{lease, err}
	}()
	return ch
}

// TestEtcd_RequestsSlowerThanRequestTimeout_BlockingAcquireRetries: while
// every answer takes longer than the request timeout (an overloaded
// server), TryAcquire fails fast with ErrUnavailable, but a blocking
// Acquire, its context still live, cleans up and tries again until the
// server is fast again, and is granted; nothing is left behind.
func TestEtcd_RequestsSlowerThanRequestTimeout_BlockingAcquireRetries(t *testing.T) {
	srv := testenv.Etcd(t)
	proxy := srv.Proxy(t)
	h := newHarness(srv.Addr())
	a := mustLocker(t, h, []string{proxy.Addr()}, etcd.WithRequestTimeout(500*time.Millisecond))
	const key = "slow-server"
	ttl := locker.WithTTL(10 * time.Second) // a lease of 12 s: it outlives the slow spell
	warm, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, ttl)
	if err != nil {
		t.Fatalf("TryAcquire before the slow spell: %v", err)
	}
	if err := warm.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}

	proxy.Latency(t, time.Second)
	if _, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, ttl); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire while answers take 1 s (request timeout 500 ms) = %v, want ErrUnavailable", err)
	}
	got := acquireAsync(ctxFor(t, 60*time.Second), a, key, ttl)
	select {
	case r := <-got:
		t.Fatalf("Acquire returned while every answer outlasts the request timeout: %v, %v", r.lease, r.err)
	case <-time.After(3 * time.Second):
	}
	proxy.Heal(t)
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire across a 3 s spell of answers slower than the request timeout = %v, want it granted", r.err)
	}
	if err := r.lease.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Keys of the failed attempts created before the granted one are gone
	// (it waited for them); a late one is stopped by its tombstone.
	b := mustLocker(t, h, nil)
	free, err := b.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("another Locker's TryAcquire after the Release = %v: a failed attempt left a holder", err)
	}
	_ = free.Release(ctxFor(t, 10*time.Second))
}

// TestEtcd_WaiterLeaseDies_RequeuedAndGranted: a waiter whose shared lease
// dies (revoked on the server, as a lease not renewed in time expires) has
// lost its queue key, not a lock: its Acquire queues again on a fresh lease
// and is granted once the holder releases.
func TestEtcd_WaiterLeaseDies_RequeuedAndGranted(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	raw := h.newClient(t)
	const key = "waiter-lease-dies"
	lp := h.prefix + key + "\x00"
	holder, err := mustLocker(t, h, nil).TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	a := mustLocker(t, h, nil)
	got := acquireAsync(ctxFor(t, 60*time.Second), a, key, locker.WithTTL(2*time.Second))
	waitKeys(t, raw, lp, 2)
	resp, err := raw.Get(ctxFor(t, 10*time.Second), lp, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("reading the lock's keys: %v", err)
	}
	held, dead := resp.Kvs[0].Lease, resp.Kvs[1].Lease
	if _, err := raw.Revoke(ctxFor(t, 10*time.Second), clientv3.LeaseID(dead)); err != nil {
		t.Fatalf("Revoke the waiter's lease: %v", err)
	}

	// The waiter notices at its lease's next renewal and queues again.
	deadline := time.Now().Add(20 * time.Second)
	for requeued := false; !requeued; {
		select {
		case r := <-got:
			t.Fatalf("Acquire returned while the lock is still held, after its waiter key's lease died: %v, %v", r.lease, r.err)
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := raw.Get(ctxFor(t, 10*time.Second), lp, clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("reading the lock's keys: %v", err)
		}
		for _, kv := range resp.Kvs {
			requeued = requeued || (len(resp.Kvs) == 2 && kv.Lease != dead && kv.Lease != held)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not queue again within 20 s of its lease's death (lease TTL 3 s): %d keys", len(resp.Kvs))
		}
	}
	if err := holder.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the re-queued waiter's Acquire = %v, want it granted", r.err)
		}
		if r.lease.Token() <= holder.Token() {
			t.Fatalf("token %d after the holder's %d", r.lease.Token(), holder.Token())
		}
		_ = r.lease.Release(ctxFor(t, 10*time.Second))
	case <-time.After(20 * time.Second):
		t.Fatal("the re-queued waiter was not granted within 20 s of the release")
	}
}
