package etcd_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func mustLocker(t *testing.T, h *harness, endpoints []string, opts ...locker.Option) locker.Locker {
	t.Helper()
	l, err := h.newLocker(t, endpoints, opts...)
	if err != nil {
		t.Fatalf("new locker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fencedResource is a resource behind a fencing guard that also detects two
// writers inside it at once: the overlap a fencing token must prevent.
type fencedResource struct {
	guard  *fencing.Memory
	inside atomic.Int32
}

func (r *fencedResource) write(ctx context.Context, key string, token uint64) error {
	return r.guard.Write(ctx, key, token, func() error {
		if !r.inside.CompareAndSwap(0, 1) {
			return errors.New("two holders inside the fenced resource at once")
		}
		time.Sleep(20 * time.Millisecond)
		r.inside.Store(0)
		return nil
	})
}

// TestEtcd_LeaderKilled_WaitersAcquireInTokenOrderWithinTTLPlusElection kills
// the leader of a 3-member cluster while a lock is held and waiters queue.
// The holder then stops (never refreshes nor releases); the lock must pass
// to every waiter in turn, with increasing tokens and no overlap at the
// fenced resource, the first within TTL + election time.
func TestEtcd_LeaderKilled_WaitersAcquireInTokenOrderWithinTTLPlusElection(t *testing.T) {
	c := testenv.EtcdCluster(t)
	h := newHarness(c.Addrs()...)
	// The holder's TTL must outlast four waiters queueing behind it: a
	// quiet fresh-clone run on a loaded machine (2026-12-04) saw 3 s not
	// be enough, the holder's key gone before the waiters' were there.
	const holderTTL, ttl = 10 * time.Second, 3 * time.Second
	const election = 5 * time.Second // generous: election timeout 1 s, plus client failover
	key := "leader-killed"
	res := &fencedResource{guard: fencing.NewMemory()}

	holder, err := mustLocker(t, h, c.Addrs()).TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(holderTTL), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := res.write(context.Background(), key, holder.Token()); err != nil {
		t.Fatalf("holder's write: %v", err)
	}

	const waiters = 4
	type result struct {
		token uint64
		at    time.Time
		err   error
	}
	results := make(chan result, waiters)
	var wg sync.WaitGroup
	for range waiters {
		l := mustLocker(t, h, c.Addrs())
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctxFor(t, time.Minute), key, locker.WithTTL(ttl), locker.WithAutoRefresh(true))
			if err != nil {
				results <- result{err: err}
				return
			}
			at := time.Now()
			err = res.write(context.Background(), key, lease.Token())
			if rerr := lease.Release(ctxFor(t, 30*time.Second)); err == nil && rerr != nil && !errors.Is(rerr, locker.ErrLeaseLost) {
				err = rerr
			}
			results <- result{lease.Token(), at, err}
		}()
	}
	// The waiters queue behind the holder before the kill: an Acquire
	// still granting its lease when the leader dies fails unavailable, as
	// any request does that finds no leader within its timeout (a loaded CI
	// run of 2026-12-03 saw half a second not be enough for four to queue).
	waitKeys(t, h.newClient(t, c.Addrs()...), h.prefix+key+"\x00", 1+waiters)
	leader := c.Leader(t)
	killed := time.Now()
	leader.Kill(t)

	wg.Wait()
	close(results)
	var first time.Time
	for r := range results {
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		if r.token <= holder.Token() {
			t.Errorf("waiter's token %d not above the holder's %d", r.token, holder.Token())
		}
		if first.IsZero() || r.at.Before(first) {
			first = r.at
		}
	}
	t.Logf("first waiter acquired %v after the leader was killed", first.Sub(killed).Round(time.Millisecond))
	if d := first.Sub(killed); d > holderTTL+election {
		t.Errorf("first waiter acquired %v after the leader was killed, want within the holder's TTL %v + election %v", d, holderTTL, election)
	}
	if !isDone(holder) {
		t.Error("the stopped holder's lease is still live after its TTL")
	}
}

// TestEtcd_ClientPartitioned_LosesLease_StaleWriteRefused cuts a holder off
// etcd with toxiproxy: its Done fires by its local deadline, a new holder
// gets a larger token, the etcd guard refuses the old holder's write, and
// the old holder's release after the partition heals frees nothing.
func TestEtcd_ClientPartitioned_LosesLease_StaleWriteRefused(t *testing.T) {
	srv := testenv.Etcd(t)
	proxy := srv.Proxy(t)
	h := newHarness(srv.Addr())
	const ttl = 2 * time.Second
	key := "partitioned"
	a := mustLocker(t, h, []string{proxy.Addr()})
	b := mustLocker(t, h, nil)
	guard := newGuard(t, h.newClient(t), h.prefix+"fence/")

	old, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(ttl), locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := guard.Admit(ctxFor(t, 10*time.Second), key, old.Token()); err != nil {
		t.Fatalf("guard refused the first holder: %v", err)
	}
	proxy.Blackhole(t)
	select {
	case <-old.Done():
	case <-time.After(ttl + time.Second):
		t.Fatalf("Done not closed %v after the partition (TTL %v)", ttl+time.Second, ttl)
	}
	if !errors.Is(old.Err(), locker.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", old.Err())
	}

	// The partitioned client cannot delete its key: the server frees it when
	// the lease expires, T + R = 3 s after the last renewal.
	next, err := b.Acquire(ctxFor(t, 2*ttl+2*time.Second), key, locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("Acquire after the partition: %v", err)
	}
	if next.Token() <= old.Token() {
		t.Fatalf("new token %d, want > %d", next.Token(), old.Token())
	}
	if err := guard.Admit(ctxFor(t, 10*time.Second), key, next.Token()); err != nil {
		t.Fatalf("guard refused the new holder: %v", err)
	}
	if err := guard.Admit(ctxFor(t, 10*time.Second), key, old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale write = %v, want ErrStaleToken", err)
	}

	proxy.Heal(t)
	if err := old.Release(ctxFor(t, 10*time.Second)); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("old holder's Release after healing = %v, want ErrLeaseLost", err)
	}
	c := mustLocker(t, h, nil)
	if l, err := c.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, locker.ErrLocked) {
		if l != nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("TryAcquire after the stale release = %v, want ErrLocked", err)
	}
	if err := next.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("new holder's Release: %v", err)
	}
}

// TestEtcd_MinorityMember_CannotGrantLock cuts a follower off its peers; a
// client that only reaches that follower cannot take a lock, even with its
// lease granted before the cut, while the majority grants it.
func TestEtcd_MinorityMember_CannotGrantLock(t *testing.T) {
	c := testenv.EtcdCluster(t)
	leader := c.Leader(t)
	var minority *testenv.Server
	var majority []string
	for _, n := range c.Nodes {
		if n != leader && minority == nil {
			minority = n
			continue
		}
		majority = append(majority, n.Addr())
	}
	h := newHarness(c.Addrs()...)
	const ttl = 3 * time.Second
	cut := mustLocker(t, h, []string{minority.Addr()})
	// Warm up: the shared lease exists before the cut.
	warm, err := cut.TryAcquire(ctxFor(t, 10*time.Second), "warm-up", locker.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire before the cut: %v", err)
	}
	if err := warm.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release before the cut: %v", err)
	}

	minority.Disconnect(t)
	defer minority.Reconnect(t)
	key := "minority"
	for _, op := range []string{"TryAcquire", "Acquire"} {
		do := cut.TryAcquire
		if op == "Acquire" {
			do = cut.Acquire
		}
		lease, err := do(ctxFor(t, 4*time.Second), key, locker.WithTTL(ttl))
		switch {
		case err == nil:
			t.Fatalf("%s through a member cut off its cluster was granted (token %d)", op, lease.Token())
		case errors.Is(err, locker.ErrLocked):
			t.Fatalf("%s through a cut-off member = %v: unavailability reported as ErrLocked", op, err)
		case !errors.Is(err, locker.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("%s through a cut-off member = %v, want ErrUnavailable or a deadline", op, err)
		}
	}
	got, err := mustLocker(t, h, majority).TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire through the majority: %v", err)
	}
	if err := got.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release through the majority: %v", err)
	}
}

// TestEtcd_FIFO_TwentyWaitersAcquireInArrivalOrder queues 20 waiters, each
// only after the previous one's key is in etcd, and checks they acquire in
// that order.
func TestEtcd_FIFO_TwentyWaitersAcquireInArrivalOrder(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	raw := h.newClient(t)
	key := "fifo"
	holder, err := mustLocker(t, h, nil).TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	const waiters = 20
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	errs := make(chan error, waiters)
	for i := range waiters {
		l := mustLocker(t, h, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctxFor(t, time.Minute), key)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
				errs <- err
			}
		}()
		waitKeys(t, raw, h.prefix+key+"\x00", int64(i+2))
	}
	if err := holder.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v, want 0..%d in order", order, waiters-1)
		}
	}
	waitKeys(t, raw, h.prefix+key+"\x00", 0)
}

// TestEtcd_SameKeyTwiceOnOneLocker_Excludes: two acquisitions of one key
// through one Locker share a lease but never an etcd key, so the second
// waits (concurrency.Mutex on one session would grant both).
func TestEtcd_SameKeyTwiceOnOneLocker_Excludes(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	l := mustLocker(t, h, nil)
	first, err := l.TryAcquire(ctxFor(t, 10*time.Second), "twice")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := l.TryAcquire(ctxFor(t, 10*time.Second), "twice"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("second TryAcquire on the same Locker = %v, want ErrLocked", err)
	}
	got := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Acquire(ctxFor(t, 30*time.Second), "twice")
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	select {
	case <-got:
		t.Fatal("second Acquire on the same Locker was granted while the first held the lock")
	case <-time.After(300 * time.Millisecond):
	}
	if err := first.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	second := <-got
	if second == nil {
		return
	}
	if second.Token() <= first.Token() {
		t.Errorf("token %d after %d", second.Token(), first.Token())
	}
	_ = second.Release(ctxFor(t, 10*time.Second))
}

// TestEtcd_LeaseRevokedOnServer_DoneFires: when the shared lease is revoked
// behind the client's back, every lease on it ends at once.
func TestEtcd_LeaseRevokedOnServer_DoneFires(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	raw := h.newClient(t)
	l := mustLocker(t, h, nil)
	lease, err := l.TryAcquire(ctxFor(t, 10*time.Second), "revoked", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	resp, err := raw.Get(ctxFor(t, 10*time.Second), h.prefix+"revoked\x00", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the lock's key: %v (%d keys)", err, len(resp.Kvs))
	}
	if _, err := raw.Revoke(ctxFor(t, 10*time.Second), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	select {
	case <-lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5 s after the lease was revoked (TTL 10 s)")
	}
	if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
		t.Fatalf("Err() = %v, want ErrLeaseLost", lease.Err())
	}
	// A new acquisition gets a new lease.
	again, err := l.TryAcquire(ctxFor(t, 10*time.Second), "revoked", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire after the revoke: %v", err)
	}
	if err := again.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func isDone(lease locker.Lease) bool {
	select {
	case <-lease.Done():
		return true
	default:
		return false
	}
}

// waitKeys waits until the range prefix holds n keys. Its bound is for a
// loaded machine, where a CI run's 3-member cluster took 21 s to start.
func waitKeys(t *testing.T, raw *clientv3.Client, prefix string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := raw.Get(ctxFor(t, 5*time.Second), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			got := int64(-1)
			if resp != nil {
				got = resp.Count
			}
			t.Fatalf("range %q: %d keys (err %v), want %d", prefix, got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
