package zookeeper_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// A queue node made before published values existed stores its label
// alone: Inspect shows that label, and a TTL it cannot know as negative.
func TestInspect_NodeOfOlderVersion_ShowsBareLabel(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	// A session long enough that no refresh is late: with testTTL's 2 s a
	// loaded fresh-clone run (L12, 2026-12-04) lost the lease to a refresh
	// that timed out, and its Release failed ErrLeaseLost; this test is
	// about what Inspect shows, not about sessions.
	l := dial(t, servers, root, zookeeper.WithSessionTimeout(steadySession))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Make the root and the key's directory through the Locker.
	lease, err := l.TryAcquire(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, servers, nil)
	dir := root + "/" + base64.RawURLEncoding.EncodeToString([]byte("old"))
	p, err := conn.Create(dir+"/00000000000000000000000000000000-", []byte("old-holder"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	info, err := locker.Inspect(ctx, l, "old")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != "old-holder" || info.Value != "" || info.TTL >= 0 || info.Token != uint64(st.Czxid) || info.Waiters != 0 {
		t.Fatalf("Inspect of a bare-label node = %+v, want held by old-holder, token %d, TTL negative", info, st.Czxid)
	}
}

// Inspect reports the holder's session timeout as the bound of its TTL, and
// the grant time from the server's clock.
func TestInspect_TTLIsHolderSessionTimeout(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	// The holder's session is longer than testTTL, and another's than the
	// holder's, so that Inspect's TTL can only be the holder's. A 2 s session
	// gives a connection 1.3 s of silence before the client drops it: a
	// quiet fresh-clone run's TryAcquire (the suite's own load at 45) failed
	// "zk: connection closed" so, and this test is not about connections.
	const session = 6 * time.Second
	a := dial(t, servers, root, zookeeper.WithSessionTimeout(session))
	b := dial(t, servers, root, zookeeper.WithSessionTimeout(2*session))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now()
	lease, err := a.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	info, err := locker.Inspect(ctx, b, "k")
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock is this machine's (a container): a minute of
	// room only guards against a wrong unit or a zero time.
	if info.TTL != session || info.Granted.Before(before.Add(-time.Minute)) || info.Granted.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Inspect = %+v, want TTL %v and a grant time near %v", info, session, before)
	}
}

// List visits the lock directories a page at a time: more locks than one
// page are all listed, once each, and free directories are left out.
//
// The session is longer than testTTL: this test is about paging, and a
// fresh-clone run at load 36 saw one of its 230 grants take longer than a
// 2 s TTL ("granted after its own deadline").
func TestList_MoreThanOnePage_EachHeldLockOnce(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	l := dial(t, servers, freshRoot(t), zookeeper.WithSessionTimeout(steadySession))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 230 // the portable layer asks for pages of 100
	for i := range n {
		lease, err := l.TryAcquire(ctx, fmt.Sprintf("k%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			// A free directory (an empty container the server has not
			// removed yet) is visited, not listed.
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]int{}
	for info, err := range locker.List(ctx, l, "k") {
		if err != nil {
			t.Fatal(err)
		}
		seen[info.Key]++
	}
	for i := range n {
		k := fmt.Sprintf("k%03d", i)
		if want := min(i%10, 1); seen[k] != want {
			t.Errorf("List listed %s %d times, want %d", k, seen[k], want)
		}
	}
	if want := n - (n+9)/10; len(seen) != want {
		t.Errorf("List listed %d keys, want %d", len(seen), want)
	}
}

// A watch ends when its connection goes down: the caller watches again
// and inspects, rather than wait for news that cannot come.
func TestWatch_ConnectionLost_WatchEnds(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	d := &killDialer{}
	l, _, err := dialWith(servers, freshRoot(t), testTTL, d.dial)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := true
	for info, err := range locker.Watch(ctx, l, "k") {
		if first {
			if err != nil || info.Held {
				t.Fatalf("Watch first yielded %+v, %v; want the free key", info, err)
			}
			first = false
			d.kill()
			continue
		}
		if !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("Watch yielded %+v, %v after its connection died; want ErrUnavailable", info, err)
		}
		return
	}
	t.Fatal("Watch ended without an error")
}
