package zookeeper_test

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// ZooKeeper's opcode of delete.
const opDelete = 2

// gate holds back, once armed with an opcode, the first request of that
// opcode its connections send, until the test lets it go: the test acts at
// an exact point of an acquisition.
type gate struct {
	armed   atomic.Int32 // the opcode to hold back, or 0
	held    chan int32   // the opcode of the request held back
	release chan struct{}
	stop    chan struct{} // closed at the test's end: nothing is held any more
	once    sync.Once
}

func newGate() *gate {
	return &gate{held: make(chan int32), release: make(chan struct{}), stop: make(chan struct{})}
}

func (g *gate) open() { g.once.Do(func() { close(g.stop) }) }

type gateConn struct {
	net.Conn
	g *gate
}

func (g *gate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &gateConn{Conn: c, g: g}, nil
}

func (c *gateConn) Write(b []byte) (int, error) {
	// A request is [length][xid][opcode]…, in one Write by go-zookeeper.
	// The connect request (0 where the xid would be: its protocol version),
	// pings, auth and watch requests (negative xids) pass.
	if len(b) >= 12 {
		xid := int32(binary.BigEndian.Uint32(b[4:8]))
		op := int32(binary.BigEndian.Uint32(b[8:12]))
		if xid > 0 && op != 0 && c.g.armed.CompareAndSwap(op, 0) {
			select {
			case c.g.held <- op:
				select {
				case <-c.g.release:
				case <-c.g.stop:
				}
			case <-c.g.stop:
			}
		}
	}
	return c.Conn.Write(b)
}

// A TryAcquire that queued (the queue looked free at its first look) and
// then found the key held deletes its node again; when the delete cannot
// get through within the clean-up's grace, the node stays queued — first
// in line once the holder releases, refusing others' TryAcquires and
// delaying their Acquires — until the delete, retried in the background,
// gets through or the session expires. ErrLocked would tell the caller that
// nothing was left behind: the outcome is ambiguous, so the TryAcquire
// must answer ErrUnavailable. (A linearizability check saw another client's
// TryAcquire refused for ~70 ms with nobody holding.)
//
// B dials through a proxy, over connections whose requests the test holds
// back at exact points: B's create, until A holds the key (so B's fast
// check saw the queue free, and its node is second); then B's delete, until
// the proxy drops everything. B's session outlives the cut by far, so its
// node is still queued when the TryAcquire returns; once the path heals,
// the node goes (deleted by the clean-up on the resumed session, or with
// the session).
func TestPartition_TryAcquireRefusedWhileCutOff_UnavailableNotLocked(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	dir := lockDir(root, "k")
	ctx := ctxT(t, 2*time.Minute)
	raw := rawConn(t, []string{srv.Addr()}, nil)
	a := dial(t, []string{srv.Addr()}, root, locker.WithTTL(testTTL))
	// B's session: far longer than the clean-up's grace (2 s), so the
	// server keeps B's node while B's delete is dropped.
	const bSession = 15 * time.Second
	g := newGate()
	b, _, err := dialWith([]string{proxy.Addr()}, root, bSession, g.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer g.open()

	type result struct {
		lease locker.Lease
		err   error
	}
	res := make(chan result, 1)
	g.armed.Store(opMulti)
	go func() {
		lease, err := b.TryAcquire(ctx, "k", locker.WithTTL(testTTL))
		res <- result{lease, err}
	}()
	heldBack := func(what string) {
		t.Helper()
		select {
		case <-g.held:
		case r := <-res:
			t.Fatalf("B's TryAcquire returned (%v, %v) before %s", r.lease, r.err, what)
		case <-ctx.Done():
			t.Fatalf("B's TryAcquire never sent %s", what)
		}
	}

	heldBack("its create")
	holder, err := a.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("A's TryAcquire while B's create is held back: %v", err)
	}
	defer holder.Release(ctx)
	g.armed.Store(opDelete)
	g.release <- struct{}{}

	heldBack("the delete of its node")
	kids, _, err := raw.Children(dir)
	if err != nil || len(kids) != 2 {
		t.Fatalf("queue while B deletes its node = %v (%v), want A's node and B's", kids, err)
	}
	// B queued after A: its node is the younger one.
	own := kids[0]
	if own == oldest(kids) {
		own = kids[1]
	}
	proxy.Blackhole(t)
	g.release <- struct{}{}
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		t.Fatal("B's TryAcquire did not return")
	}
	if r.err == nil {
		_ = r.lease.Release(ctx)
		t.Fatal("B's TryAcquire was granted while A holds the key")
	}
	if ok, _, err := raw.Exists(dir + "/" + own); err != nil || !ok {
		t.Fatalf("B's node %s gone (%v) when its TryAcquire returned: the cut did not hold it", own, err)
	}
	switch {
	case errors.Is(r.err, locker.ErrLocked):
		t.Fatalf("B's TryAcquire = %v, while its node %s is still queued: want ErrUnavailable, not ErrLocked (which says nothing was left behind)", r.err, own)
	case !errors.Is(r.err, locker.ErrUnavailable):
		t.Fatalf("B's TryAcquire = %v, while its node %s is still queued: want ErrUnavailable", r.err, own)
	}
	t.Logf("B's TryAcquire, its node still queued: %v", r.err)

	// Healed, B's client resumes its session and its clean-up's delete gets
	// through (or, at worst, the session expires with the node).
	proxy.Heal(t)
	healed := time.Now()
	deadline := healed.Add(2*bSession + 10*time.Second)
	for {
		ok, _, w, err := raw.ExistsW(dir + "/" + own)
		if err == nil && !ok {
			t.Logf("B's node gone %v after the path healed", time.Since(healed).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's node %s still queued (%v) %v after the path healed", own, err, 2*bSession+10*time.Second)
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
	// A's hold is untouched; once A releases, the key is free to B.
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("A's Release: %v", err)
	}
	next, err := b.TryAcquire(ctx, "k", locker.WithTTL(testTTL))
	if err != nil {
		t.Fatalf("B's TryAcquire once A released and B's node is gone: %v", err)
	}
	_ = next.Release(ctx)
}
