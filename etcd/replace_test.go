package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
)

// Member replacement (issue 20): the leader of a 3-member cluster, then a
// follower, are each removed (MemberRemove) and replaced by a fresh member
// (MemberAdd, empty data directory, --initial-cluster-state=existing),
// while a holder holds a lock and waiters queue on it, all through clients
// given the original three addresses. Within the guarantee (a majority
// keeps its data throughout): nobody else holds the lock while the holder's
// lease is live, the holder keeps it (or, if it lost it, its Done and Err
// say so), and the waiters then take it in turn with tokens above the
// holder's, in token order at the fenced resource, without overlap.
func TestEtcd_MemberReplaced_HolderKeepsLock_WaitersFollowInTokenOrder(t *testing.T) {
	c := testenv.EtcdCluster(t)
	addrs := c.Addrs() // the clients keep these, dead ones included
	h := newHarness(addrs...)
	const ttl = 3 * time.Second
	key := "replaced"
	res := &fencedResource{guard: fencing.NewMemory()}

	holder, err := mustLocker(t, h, addrs).TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(ttl), locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := res.write(context.Background(), key, holder.Token()); err != nil {
		t.Fatalf("holder's write: %v", err)
	}

	var released atomic.Bool
	const waiters = 3
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for range waiters {
		l := mustLocker(t, h, addrs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctxFor(t, 2*time.Minute), key, locker.WithTTL(ttl), locker.WithAutoRefresh(true))
			if err != nil {
				errs <- fmt.Errorf("waiter: %w", err)
				return
			}
			if !released.Load() && !isDone(holder) {
				errs <- fmt.Errorf("a waiter acquired (token %d) while the holder's lease (token %d) was live", lease.Token(), holder.Token())
			}
			if lease.Token() <= holder.Token() {
				errs <- fmt.Errorf("waiter's token %d not above the holder's %d", lease.Token(), holder.Token())
			}
			err = res.write(context.Background(), key, lease.Token())
			if rerr := lease.Release(ctxFor(t, 30*time.Second)); err == nil && rerr != nil && !errors.Is(rerr, locker.ErrLeaseLost) {
				err = rerr
			}
			errs <- err
		}()
	}
	// Let the waiters queue behind the holder.
	time.Sleep(500 * time.Millisecond)

	leader := c.Leader(t)
	for i, n := range c.Nodes {
		if n == leader {
			c.ReplaceEtcdMember(t, i)
			c.ReplaceEtcdMember(t, (i+1)%len(c.Nodes))
			break
		}
	}
	// The fresh members serve: a Locker given only the new addresses, and
	// one given only the original ones, see the same lock held.
	for _, a := range [][]string{c.Addrs(), addrs} {
		if l, err := mustLocker(t, h, a).TryAcquire(ctxFor(t, 30*time.Second), key); !errors.Is(err, locker.ErrLocked) && !isDone(holder) {
			if l != nil {
				l.Release(context.Background())
			}
			t.Errorf("TryAcquire through %v while the holder holds = %v, want ErrLocked", a, err)
		}
	}

	if isDone(holder) {
		if !errors.Is(holder.Err(), locker.ErrLeaseLost) {
			t.Errorf("the holder's lease ended with %v, want ErrLeaseLost", holder.Err())
		}
		t.Logf("the holder lost its lease during the replacements, and was told: %v", holder.Err())
	} else if err := holder.Refresh(ctxFor(t, 10*time.Second)); err != nil {
		t.Errorf("the holder's Refresh after the replacements: %v", err)
	}
	released.Store(true)
	if err := holder.Release(ctxFor(t, 30*time.Second)); err != nil && !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("the holder's Release: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
