package zookeeper_test

// Regression tests of the review in issue 15 (ZooKeeper items), each run
// against a real server.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// Issue 15, item 9: New started its event reader before locker.New, and left
// it running when locker.New refused the options.
func TestNew_RefusedOptions_NoGoroutineLeft(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	conn, events, err := zk.Connect(addr, testTTL, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ignore := goleak.IgnoreCurrent()
	if l, err := zookeeper.New(conn, zookeeper.WithRoot(freshRoot(t)), zookeeper.WithSessionTimeout(testTTL), zookeeper.WithEvents(events), locker.WithTTL(time.Nanosecond)); !errors.Is(err, locker.ErrInvalidOption) {
		if l != nil {
			_ = l.Close()
		}
		t.Fatalf("New with a TTL of 1ns = %v, want ErrInvalidOption", err)
	}
	// The caller's own connection may reconnect meanwhile on a loaded
	// machine, and go-zookeeper then starts its send and receive loops
	// anew: those belong to conn, which the test owns, not to the Locker.
	// The leak this test guards against is the backend's event reader.
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
		goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop"))
}

// Issue 15, item 11: the server refuses some characters the root validation
// let through (U+D800–U+F8FF); the first acquire then failed as unavailable.
// Open must refuse them with ErrInvalidURL.
func TestOpen_RootWithPrivateUseCharacter_ErrInvalidURL(t *testing.T) {
	addr := testenv.ZooKeeper(t).Addr()
	for _, root := range []string{"/a\ue000", "/a/\uf8ff/b", "/x\uf000"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := locker.Open(ctx, "zookeeper://"+addr+root)
		if err == nil {
			_, aerr := l.TryAcquire(ctx, "k")
			_ = l.Close()
			cancel()
			t.Errorf("Open with root %q = a Locker (its first TryAcquire: %v), want ErrInvalidURL", root, aerr)
			continue
		}
		cancel()
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open with root %q = %v, want ErrInvalidURL", root, err)
		}
	}
}

// watchedPaths returns the paths starting with prefix on which the server
// holds watches (the wchp four-letter word); with sessions, the ids of the
// sessions watching them instead.
func watchedPaths(t *testing.T, addr, prefix string, sessions bool) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("wchp")); err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "/"):
			in = strings.HasPrefix(l, prefix)
			if in && !sessions {
				out = append(out, l)
			}
		case in && sessions && strings.TrimSpace(l) != "":
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// vanisher deletes, through del, the node named in the first exists or
// getData request its connection sends for a path under dir once armed,
// before the request reaches the server: the own node vanishes between its
// create and its first read.
type vanisher struct {
	mu    sync.Mutex
	dir   string
	del   *zk.Conn
	armed bool
	gone  string
}

type vanishConn struct {
	net.Conn
	v *vanisher
}

func (v *vanisher) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &vanishConn{Conn: c, v: v}, nil
}

// ZooKeeper's opcodes of exists and getData.
const opExists, opGetData = 3, 4

func (c *vanishConn) Write(b []byte) (int, error) {
	// A request is [length][xid][opcode][path length][path]…
	if len(b) >= 16 {
		op := int32(binary.BigEndian.Uint32(b[8:12]))
		n := int(binary.BigEndian.Uint32(b[12:16]))
		if (op == opExists || op == opGetData) && n > 0 && 16+n <= len(b) {
			p := string(b[16 : 16+n])
			v := c.v
			v.mu.Lock()
			if v.armed && strings.HasPrefix(p, v.dir+"/") {
				v.armed = false
				v.gone = p
				_ = v.del.Delete(p, -1)
			}
			v.mu.Unlock()
		}
	}
	return c.Conn.Write(b)
}

// Issue 15, item 13: a contended acquisition read its own node with ExistsW;
// when the node was gone already, that left a watch for its creation (which
// never comes) on the server for the rest of the session.
func TestContendedAcquire_OwnNodeVanished_NoWatchLeft(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	addr := []string{srv.Addr()}
	root := freshRoot(t)
	v := &vanisher{dir: lockDir(root, "k"), del: rawConn(t, addr, nil)}
	ctx := ctxT(t, 30*time.Second)
	a, _, err := dialWith(addr, root, testTTL, v.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := dial(t, addr, root, locker.WithTTL(testTTL))
	held, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	v.mu.Lock()
	v.armed = true
	v.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	lease, err := a.Acquire(actx, "k")
	cancel()
	if err == nil {
		_ = lease.Release(ctx)
	}
	v.mu.Lock()
	gone := v.gone
	v.mu.Unlock()
	if gone == "" {
		t.Fatal("no read of the own node was seen: the fault did not happen")
	}
	t.Logf("own node deleted before its first read: %s (Acquire: %v)", gone, err)
	if w := watchedPaths(t, srv.Addr(), gone, false); len(w) > 0 {
		t.Fatalf("watches left on the server on the vanished own node: %v", w)
	}
}

// Issue 15, item 7: a refresh was a plain read, which a follower cut off
// from its peers keeps answering from its stale copy (until it misses the
// leader for syncLimit ticks) while the leader expires the session and
// grants the lock to another client. A is connected to a follower only; the
// follower is cut off its peers (packets held, no connection broken); B,
// connected to the two others, waits for the lock. Once B holds it, A's
// refresh must not succeed, and A's deadline must not reach past B's grant.
func TestStaleFollower_RefreshAfterTheLeaderExpiredTheSession_Fails(t *testing.T) {
	e := testenv.ZooKeeperEnsembleLinked(t)
	follower, others := aFollower(t, e)
	root := freshRoot(t)
	a := dial(t, []string{e.Nodes[follower].Addr()}, root, locker.WithTTL(testTTL))
	b := dial(t, others, root, locker.WithTTL(testTTL))
	ctx := ctxT(t, 60*time.Second)
	// A keeps its lease alive (a refresh every third of the TTL).
	lease, err := a.Acquire(ctx, "k", locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatal(err)
	}
	e.Isolate(t, follower)
	cut := time.Now()
	held, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("B's Acquire while A's follower is cut off: %v", err)
	}
	granted := time.Now()
	defer held.Release(ctx)
	t.Logf("B granted %v after the cut", granted.Sub(cut).Round(time.Millisecond))
	if d := lease.Deadline(); lease.Err() == nil && d.After(granted) {
		t.Fatalf("B holds the lock while A's lease is still valid for %v after B's grant (A's refreshes went on through the cut-off follower)", d.Sub(granted).Round(time.Millisecond))
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	err = lease.Refresh(rctx)
	cancel()
	if err == nil {
		t.Fatalf("A's refresh through the cut-off follower succeeded %v after the cut, after B was granted the lock (A's deadline now %v after B's grant)",
			time.Since(cut).Round(time.Millisecond), lease.Deadline().Sub(granted).Round(time.Millisecond))
	}
	t.Logf("A's refresh after B's grant: %v", err)
	if d := lease.Deadline(); d.After(granted) {
		t.Fatalf("A's deadline is %v after B's grant", d.Sub(granted))
	}
}

// aFollower returns the index of a follower of e and the addresses of the
// other members.
func aFollower(t *testing.T, e *testenv.LinkedEnsemble) (follower int, others []string) {
	t.Helper()
	leader := e.Leader(t)
	follower = -1
	for i, n := range e.Nodes {
		if n != leader && follower < 0 {
			follower = i
			continue
		}
		others = append(others, n.Addr())
	}
	return follower, others
}

// Issue 15, item 8: a TTL longer than the session timeout S rested on an
// argument with gaps (a process paused longer than S finds its session
// expired and the lock granted again while its deadline is still ahead; a
// watch event is not an answer to a recent request; the loss's clean-up may
// delete the node before the deadline promised). Such TTLs are refused, on
// every Locker, at New and per call; a shorter TTL is rounded up to S.
func TestTTLLongerThanSessionTimeout_Refused_ShorterRoundedUp(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	ctx := ctxT(t, 30*time.Second)
	if l, err := locker.Open(ctx, zkURL(addr, root), locker.WithTTL(testTTL+time.Millisecond)); !errors.Is(err, locker.ErrInvalidOption) {
		if l != nil {
			_ = l.Close()
		}
		t.Fatalf("Open with a TTL beyond the session timeout = %v, want ErrInvalidOption", err)
	}
	d := dial(t, addr, root)
	if lease, err := d.TryAcquire(ctx, "k", locker.WithTTL(3*testTTL)); !errors.Is(err, locker.ErrInvalidOption) {
		if lease != nil {
			_ = lease.Release(ctx)
		}
		t.Fatalf("TryAcquire with a TTL of 3 session timeouts = %v, want ErrInvalidOption", err)
	}
	start := time.Now()
	lease, err := d.TryAcquire(ctx, "k", locker.WithTTL(testTTL/4))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if got := lease.Deadline().Sub(start); got < testTTL/2 {
		t.Fatalf("a TTL of %v gave a deadline %v after the start, want it rounded up to the session timeout %v", testTTL/4, got, testTTL)
	}
}

// Issue 15, item 8, the third gap: when a refresh fails, the portable layer
// reports the lease lost and releases it to clean up; that release deleted
// the own node at once, while the holder had been promised the lock until
// its deadline (it may be writing when told of the loss). The node must
// outlive that deadline: nobody else gets the lock before it.
func TestFailedRefresh_CleanupWaitsForTheDeadlinePromised(t *testing.T) {
	srv := testenv.ZooKeeper(t)
	proxy := srv.Proxy(t)
	root := freshRoot(t)
	a := dial(t, []string{proxy.Addr()}, root)
	b := dial(t, []string{srv.Addr()}, root)
	ctx := ctxT(t, 30*time.Second)
	lease, err := a.TryAcquire(ctx, "k", locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := lease.Deadline()
	// Answers from the server now come late: the next refresh times out.
	proxy.Latency(t, 500*time.Millisecond)
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = lease.Refresh(rctx)
	cancel()
	if err == nil {
		t.Fatal("a refresh slower than its context succeeded")
	}
	for {
		next, err := b.TryAcquire(ctx, "k")
		if err == nil {
			got := time.Now()
			_ = next.Release(ctx)
			if got.Before(deadline) {
				t.Fatalf("another client got the lock %v before the deadline promised to the holder whose refresh failed", deadline.Sub(got).Round(time.Millisecond))
			}
			return
		}
		if !errors.Is(err, locker.ErrLocked) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
