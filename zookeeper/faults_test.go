package zookeeper_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockDir is where the package keeps key's queue under root.
func lockDir(root, key string) string {
	return root + "/" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// replyEater passes a connection's traffic through until armed; then, once
// a create request has been written, it swallows everything the server sends
// back and breaks the connection: the create is applied, its reply is lost.
type replyEater struct {
	armed   atomic.Bool
	eating  atomic.Bool
	swallow atomic.Int32
}

type eatingConn struct {
	net.Conn
	e *replyEater
}

func (e *replyEater) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &eatingConn{Conn: c, e: e}, nil
}

// ZooKeeper's opcodes of create and multi (the package creates its nodes in
// a multi).
const opCreate, opMulti = 1, 14

func (c *eatingConn) Write(b []byte) (int, error) {
	// A request is [length][xid][opcode]…, in one Write by go-zookeeper.
	if len(b) < 12 {
		return c.Conn.Write(b)
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	if (op == opCreate || op == opMulti) && c.e.armed.CompareAndSwap(true, false) {
		c.e.eating.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *eatingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.e.eating.Load() {
		c.e.swallow.Add(1)
		// Give the server time to apply the create, then cut the line.
		time.Sleep(300 * time.Millisecond)
		c.e.eating.Store(false)
		_ = c.Conn.Close()
		return 0, errors.New("test: reply swallowed")
	}
	return n, err
}

func TestLostCreateReply_FindsOwnNodeOnce_LockStillWorks(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	eater := &replyEater{}
	a, _, err := dialWith(addr, root, testTTL, eater.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := dial(t, addr, root, locker.WithTTL(testTTL))
	c := rawConn(t, addr, nil)

	// Make the directory first, so that the create whose reply is eaten is
	// the lock node's own.
	warm, err := a.TryAcquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	eater.armed.Store(true)
	lease, err := a.Acquire(ctxT(t, 20*time.Second), "k")
	if err != nil {
		t.Fatalf("Acquire across a lost create reply: %v", err)
	}
	if eater.swallow.Load() == 0 {
		t.Fatal("no reply was swallowed: the fault did not happen")
	}
	kids, _, err := c.Children(lockDir(root, "k"))
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != 1 {
		t.Fatalf("queue after a lost create reply = %v, want exactly the one node of the holder", kids)
	}
	if _, err := b.TryAcquire(ctxT(t, 10*time.Second), "k"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire by another client while held = %v, want ErrLocked", err)
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next, err := b.TryAcquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatalf("TryAcquire after the release: %v", err)
	}
	if next.Token() <= lease.Token() {
		t.Fatalf("token %d after %d, want larger", next.Token(), lease.Token())
	}
	_ = next.Release(ctxT(t, 10*time.Second))
}

func TestPartition_PastSessionTimeout_LeaseLost_NewHolderLargerToken_StaleWriteRefused(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	a := dial(t, []string{proxy.Addr()}, root, locker.WithTTL(testTTL))
	b := dial(t, []string{srv.Addr()}, root, locker.WithTTL(testTTL))
	guard, err := zookeeper.NewGuard(rawConn(t, []string{srv.Addr()}, nil), zookeeper.WithGuardRoot(root+"-fence"))
	if err != nil {
		t.Fatal(err)
	}

	old, err := a.Acquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Acquire(ctxT(t, 10*time.Second), "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Admit(ctxT(t, 10*time.Second), "res", old.Token()); err != nil {
		t.Fatalf("guard refused the first holder: %v", err)
	}
	proxy.Blackhole(t)
	// Every lease of the session ends: the server may expire the session S
	// after it last heard from the client.
	for _, lease := range []locker.Lease{old, other} {
		select {
		case <-lease.Done():
		case <-time.After(testTTL + time.Second):
			t.Fatalf("the partitioned holder's lease %q did not end within the session timeout", lease.Key())
		}
	}
	if !errors.Is(old.Err(), locker.ErrLeaseLost) {
		t.Fatalf("partitioned lease Err = %v, want ErrLeaseLost", old.Err())
	}
	next, err := b.Acquire(ctxT(t, 3*testTTL+5*time.Second), "k")
	if err != nil {
		t.Fatalf("Acquire once the partitioned session expired: %v", err)
	}
	defer next.Release(context.Background())
	if next.Token() <= old.Token() {
		t.Fatalf("new token %d, want > %d", next.Token(), old.Token())
	}
	if err := guard.Admit(ctxT(t, 10*time.Second), "res", next.Token()); err != nil {
		t.Fatalf("guard refused the new holder: %v", err)
	}
	proxy.Heal(t)
	if err := guard.Admit(ctxT(t, 10*time.Second), "res", old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale write by the partitioned holder = %v, want ErrStaleToken", err)
	}
	if err := old.Release(ctxT(t, 10*time.Second)); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("stale Release = %v, want ErrLeaseLost", err)
	}
}

func TestGuard_StaleTokenRefused_WriteAppliedAtomically(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	c := rawConn(t, addr, nil)
	root := freshRoot(t)
	g, err := zookeeper.NewGuard(c, zookeeper.WithGuardRoot(root+"/fence"))
	if err != nil {
		t.Fatal(err)
	}
	state := root + "-state"
	// The parent of every test root: absent when this test runs first.
	if _, err := c.Create(path.Dir(root), nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := c.Create(state, []byte("v0"), zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	if _, err := g.Write(ctx, "res", 10, &zk.SetDataRequest{Path: state, Data: []byte("v10"), Version: -1}); err != nil {
		t.Fatalf("write with token 10: %v", err)
	}
	if _, err := g.Write(ctx, "res", 5, &zk.SetDataRequest{Path: state, Data: []byte("v5"), Version: -1}); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("write with token 5 after 10 = %v, want ErrStaleToken", err)
	}
	if err := g.Admit(ctx, "res", 10); err != nil {
		t.Fatalf("token 10 again = %v, want admitted", err)
	}
	// A write that fails makes the admission fail too: one transaction.
	if _, err := g.Write(ctx, "res", 20, &zk.SetDataRequest{Path: state, Data: []byte("v20"), Version: 999}); err == nil {
		t.Fatal("a failing write was reported as done")
	}
	if err := g.Admit(ctx, "res", 15); err != nil {
		t.Fatalf("token 15 after a failed transaction with 20 = %v, want admitted", err)
	}
	data, _, err := c.Get(state)
	if err != nil || string(data) != "v10" {
		t.Fatalf("state = %q, %v; want v10", data, err)
	}
}

func TestNoHerd_FiftyWaiters_ReleaseWakesExactlyOne(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	// The sessions outlast a loaded machine's stalls: a loaded fresh-clone
	// run of 2026-12-03 (load 37) saw a waiter's 2 s session expire before
	// the queue formed, and two of 2026-12-04 saw the holder's 2 s lease
	// lost (a refresh has S/3 of room) before the fiftieth waiter queued;
	// the test is of the wake-ups a release sends, not of sessions.
	holderL := dial(t, addr, root, zookeeper.WithSessionTimeout(steadySession))
	holder, err := holderL.Acquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	var watchEvents atomic.Int64 // node events delivered to the waiters' connections
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan locker.Lease, n)
	var wg sync.WaitGroup
	for range n {
		conn := rawConnSession(t, addr, steadySession, func(ev zk.Event) {
			if ev.Type != zk.EventSession && ev.Type != zk.EventNotWatching {
				watchEvents.Add(1)
			}
		})
		l, err := zookeeper.New(conn, zookeeper.WithRoot(root), zookeeper.WithSessionTimeout(steadySession))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			if lease, err := l.Acquire(ctx, "k"); err == nil {
				got <- lease
			}
		}()
	}
	c := rawConn(t, addr, nil)
	waitQueue(t, c, lockDir(root, "k"), n+1)
	before := watchEvents.Load()
	if err := holder.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var next locker.Lease
	select {
	case next = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter acquired after the release")
	}
	// Let any other wake-up arrive before counting.
	time.Sleep(time.Second)
	if woken := watchEvents.Load() - before; woken != 1 {
		t.Fatalf("a release delivered %d watch events to the 50 waiters, want exactly 1", woken)
	}
	select {
	case extra := <-got:
		t.Fatalf("a second waiter acquired while %q is held (token %d)", next.Key(), extra.Token())
	default:
	}
	cancel()
	wg.Wait()
	_ = next.Release(ctxT(t, 10*time.Second))
}

// waitQueue waits until dir holds n nodes.
func waitQueue(t *testing.T, c *zk.Conn, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		kids, _, w, err := c.ChildrenW(dir)
		if err == nil && len(kids) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: %d nodes, want %d (err %v)", dir, len(kids), n, err)
		}
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case <-w:
		case <-time.After(time.Until(deadline)):
		}
	}
}

func TestFIFO_TwentyWaiters_AcquireInArrivalOrder(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	l := dial(t, addr, root, locker.WithTTL(testTTL))
	holder, err := l.Acquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, addr, nil)
	const n = 20
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := l.Acquire(ctxT(t, 60*time.Second), "k")
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = lease.Release(context.Background())
		}()
		// The next waiter queues only once this one is in the queue.
		waitQueue(t, c, lockDir(root, "k"), i+2)
	}
	if err := holder.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v, want arrival order 0…%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("%d of %d waiters acquired", len(order), n)
	}
}

func TestEnsemble_LeaderKilled_TokensIncrease_FencedWritesNeverOverlap(t *testing.T) {
	cl := testenv.ZooKeeperEnsemble(t)
	addrs := cl.Addrs()
	root := freshRoot(t)
	const ttl = 4 * time.Second
	guard := fencing.NewMemory()
	var (
		mu       sync.Mutex
		admitted []uint64 // tokens whose fenced write was admitted, in order
		inside   atomic.Int32
		overlaps atomic.Int32
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := func(l locker.Locker) {
		for ctx.Err() == nil {
			actx, acancel := context.WithTimeout(ctx, 20*time.Second)
			lease, err := l.Acquire(actx, "k")
			acancel()
			if err != nil {
				continue // failover: the backend may be unavailable for a while
			}
			err = guard.Write(ctx, "res", lease.Token(), func() error {
				// The write itself: fenced, so never two at once even if a
				// lease ended early during the failover.
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				admitted = append(admitted, lease.Token())
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				return nil
			})
			if err != nil && !errors.Is(err, fencing.ErrStaleToken) {
				t.Errorf("guard: %v", err)
			}
			_ = lease.Release(context.Background())
		}
	}
	var wg sync.WaitGroup
	for range 3 {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := locker.Open(dctx, "zookeeper://"+strings.Join(addrs, ",")+root+"?session_timeout="+ttl.String())
		dcancel()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wg.Add(1)
		go func() { defer wg.Done(); work(l) }()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(admitted) }
	waitFor := func(n int, why string) {
		deadline := time.Now().Add(60 * time.Second)
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: only %d fenced writes", why, count())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(10, "before the leader was killed")
	cl.Leader(t).Kill(t)
	before := count()
	waitFor(before+10, "after the leader was killed")
	cancel()
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d fenced writes overlapped", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(admitted); i++ {
		if admitted[i] <= admitted[i-1] {
			t.Fatalf("admitted tokens not strictly increasing at %d: %d after %d", i, admitted[i], admitted[i-1])
		}
	}
}

func TestOwnNodeDeletedByAnother_LeaseLostAtOnce(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	l := dial(t, addr, root, locker.WithTTL(testTTL))
	lease, err := l.Acquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	c := rawConn(t, addr, nil)
	dir := lockDir(root, "k")
	kids, _, err := c.Children(dir)
	if err != nil || len(kids) != 1 {
		t.Fatalf("queue = %v, %v; want the holder's node", kids, err)
	}
	if err := c.Delete(dir+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(testTTL / 2):
		t.Fatal("lease not ended after its node was deleted")
	}
	if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", lease.Err())
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Release after the loss = %v, want ErrLeaseLost", err)
	}
}

// TestSessionExpiredByServer_EveryLeaseEnds_LearnedOnReconnect_LockerRecovers
// has the server really expire a holder's session: the holder is cut off
// past the session timeout, then let back, so that it learns StateExpired
// when it reconnects. Unlike the partition test above, it goes on past the
// expiry: every lease of the session ended by its local deadline, the old
// holder's Releases touch nothing of the new holder's, and the same Locker
// works again in a new session.
func TestSessionExpiredByServer_EveryLeaseEnds_LearnedOnReconnect_LockerRecovers(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)

	// The caller's own connection, through the proxy, its events handed to
	// the Locker and seen by the test too.
	events := make(chan zk.Event, 1024)
	var expired atomic.Bool
	conn := rawConn(t, []string{proxy.Addr()}, func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
			expired.Store(true)
		}
		select {
		case events <- ev:
		default:
			t.Errorf("event %v dropped: the Locker does not read its events", ev)
		}
	})
	a, err := zookeeper.New(conn, zookeeper.WithRoot(root), zookeeper.WithSessionTimeout(testTTL), zookeeper.WithEvents(events))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := dial(t, []string{srv.Addr()}, root, locker.WithTTL(testTTL))
	c := rawConn(t, []string{srv.Addr()}, nil)

	oldSession := conn.SessionID()
	keys := []string{"k1", "k2"}
	old := make([]locker.Lease, len(keys))
	for i, k := range keys {
		if old[i], err = a.Acquire(ctxT(t, 10*time.Second), k); err != nil {
			t.Fatal(err)
		}
	}

	proxy.Blackhole(t)
	for _, lease := range old {
		select {
		case <-lease.Done():
		case <-time.After(testTTL + time.Second):
			t.Fatalf("lease %q of the cut-off session did not end within the session timeout", lease.Key())
		}
		if !errors.Is(lease.Err(), locker.ErrLeaseLost) {
			t.Fatalf("lease %q: Err = %v, want ErrLeaseLost", lease.Key(), lease.Err())
		}
	}

	// The server expires the session and deletes its nodes: the other client
	// gets both keys, with larger tokens.
	next := make([]locker.Lease, len(keys))
	for i, k := range keys {
		if next[i], err = b.Acquire(ctxT(t, 3*testTTL+10*time.Second), k); err != nil {
			t.Fatalf("Acquire %q once the cut-off session expired: %v", k, err)
		}
		if next[i].Token() <= old[i].Token() {
			t.Fatalf("key %q: new token %d, want > %d", k, next[i].Token(), old[i].Token())
		}
	}

	// Back on the network, the holder learns that its session expired, and
	// go-zookeeper makes a new one.
	proxy.Heal(t)
	deadline := time.Now().Add(30 * time.Second)
	for !expired.Load() || conn.SessionID() == 0 || conn.SessionID() == oldSession {
		if time.Now().After(deadline) {
			t.Fatalf("after the heal: expired=%v, session %#x (old %#x): want StateExpired and a new session", expired.Load(), conn.SessionID(), oldSession)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The old leases' Releases report the loss and touch nothing: the new
	// holder's nodes stay, its leases live.
	for i, lease := range old {
		if err := lease.Release(ctxT(t, 10*time.Second)); !errors.Is(err, locker.ErrLeaseLost) {
			t.Fatalf("Release of %q by the expired holder = %v, want ErrLeaseLost", keys[i], err)
		}
	}
	for i, k := range keys {
		kids, _, err := c.Children(lockDir(root, k))
		if err != nil || len(kids) != 1 {
			t.Fatalf("queue of %q after the stale Releases = %v, %v; want the new holder's one node", k, kids, err)
		}
		select {
		case <-next[i].Done():
			t.Fatalf("the new holder's lease %q ended: %v", k, next[i].Err())
		default:
		}
		if _, err := a.TryAcquire(ctxT(t, 10*time.Second), k); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryAcquire %q by the recovered Locker while held = %v, want ErrLocked", k, err)
		}
	}

	// The Locker works on in its new session.
	for i, k := range keys {
		if err := next[i].Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		again, err := a.Acquire(ctxT(t, 10*time.Second), k)
		if err != nil {
			t.Fatalf("Acquire %q by the Locker in its new session: %v", k, err)
		}
		if again.Token() <= next[i].Token() {
			t.Fatalf("key %q: token %d after %d, want larger", k, again.Token(), next[i].Token())
		}
		if err := again.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatalf("Release %q in the new session: %v", k, err)
		}
	}
}
