package zookeeper_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// Issue 15, item 7, the contended grant: a waiter learns that its
// predecessor is gone from the server it is connected to. If that server is a
// follower cut off from its peers (packets held, no connection broken), its
// copy is stale: the leader may already have expired the waiter's session
// and handed the lock to the next waiter. So a contended grant must prove the
// session alive at the quorum before it claims the lock.
//
// W waits through a follower F (via a proxy, to hold back F's watch event);
// X waits behind W through the two other members. The holder releases; once
// F has applied the release, F is cut off its peers, and the event reaches W
// a third of a session timeout later. F, stale, still shows W first in the
// queue. The leader, hearing no more of W's session through F, expires it
// and grants X. If W is granted at all, its lease must end before X's grant.
// Without the sync of the contended grant, W was granted and held 546–604 ms
// past X's grant (3 of 3 runs).
func TestStaleFollower_ContendedGrantThroughCutOffFollower_NoTwoHolders(t *testing.T) {
	e := testenv.ZooKeeperEnsembleLinked(t)
	defer e.Heal(t)
	follower, others := aFollower(t, e)
	f := e.Nodes[follower]
	proxy := f.Proxy(t)
	root := freshRoot(t)
	holder := dial(t, others, root)
	w := dial(t, []string{proxy.Addr()}, root)
	x := dial(t, others, root)
	ctx := ctxT(t, 90*time.Second)

	h, err := holder.TryAcquire(ctx, "k", locker.WithAutoRefresh(true))
	if err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, others, nil)
	atF := rawConn(t, []string{f.Addr()}, nil)
	dir := root + "/" + base64.RawURLEncoding.EncodeToString([]byte("k"))
	waitQueue := func(n int) []string {
		t.Helper()
		for {
			kids, _, err := raw.Children(dir)
			if err == nil && len(kids) == n {
				return kids
			}
			if ctx.Err() != nil {
				t.Fatalf("queue of %d nodes never formed: %v %v (the holder's lease: %v)", n, kids, err, h.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitQueue(1)
	type result struct {
		lease locker.Lease
		err   error
		at    time.Time
	}
	// queue starts an Acquire of l that must take the n-th place in the
	// queue. One that ends before it queued is not what this test is
	// about: unavailable (a loaded CI run's W never queued, and the test
	// waited out its context without saying why), it is started again, as
	// a caller would; any other end fails the test, with its error.
	queue := func(who string, l locker.Locker, ctx context.Context, n int) (chan result, []string) {
		t.Helper()
		done := make(chan result, 1)
		start := func() {
			go func() {
				lease, err := l.Acquire(ctx, "k")
				done <- result{lease, err, time.Now()}
			}()
		}
		start()
		for {
			kids, _, err := raw.Children(dir)
			if err == nil && len(kids) == n {
				return done, kids
			}
			select {
			case r := <-done:
				if !errors.Is(r.err, locker.ErrUnavailable) {
					t.Fatalf("%s's Acquire ended before it queued: %v, %v", who, r.lease, r.err)
				}
				t.Logf("%s's Acquire ended before it queued: %v; again", who, r.err)
				start()
			case <-ctx.Done():
				t.Fatalf("%s never queued: the queue is %v %v", who, kids, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wDone, _ := queue("W", w, wctx, 2)
	xDone, kids := queue("X", x, ctx, 3)
	holderNode := oldest(kids)
	// W waits: F holds its watch on the holder's node (so W has read the
	// queue and found itself behind the holder).
	for !slices.Contains(watchedPaths(t, f.Addr(), dir+"/"+holderNode, false), dir+"/"+holderNode) {
		if ctx.Err() != nil {
			t.Fatal("W never watched the holder's node on F")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Hold back what F tells W (a latency toxic keeps the bytes and lets
	// them through on Heal; a blackhole would drop them and close the
	// connection), release, and wait until F has applied the release: F's
	// watch event for W is then waiting in the proxy.
	proxy.Latency(t, time.Minute)
	held := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		atFKids, _, err := atF.Children(dir)
		if err == nil && !slices.Contains(atFKids, holderNode) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("F never applied the release: %v %v", atFKids, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.Isolate(t, follower)
	cut := time.Now()
	// Let W hear of the release well after the cut, but before its client
	// gives up on a silent connection (two thirds of the session timeout
	// since the last answer).
	time.Sleep(testTTL / 3)
	proxy.Heal(t)
	t.Logf("F's answers to W held for %v, %v of it after the cut", time.Since(held).Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))

	// A grant to W through F is sound only if W's lease ends before the
	// leader, which stops hearing of W's session at the cut, can have
	// expired it and granted X.
	var wl locker.Lease
	check := func(r result) {
		t.Helper()
		if r.err != nil {
			t.Logf("W's Acquire ended: %v", r.err)
			return
		}
		wl = r.lease
		t.Logf("W granted %v after the cut, its lease valid until %v after the cut",
			r.at.Sub(cut).Round(time.Millisecond), wl.Deadline().Sub(cut).Round(time.Millisecond))
	}
	var xr result
	select {
	case xr = <-xDone:
	case r := <-wDone:
		check(r)
		xr = <-xDone
	}
	if xr.err != nil {
		t.Fatalf("X's Acquire: %v", xr.err)
	}
	defer xr.lease.Release(context.WithoutCancel(ctx))
	t.Logf("X granted %v after the cut", xr.at.Sub(cut).Round(time.Millisecond))
	if wl == nil {
		select {
		case r := <-wDone:
			check(r)
		default: // W is still waiting: its session is gone
		}
	}
	if wl != nil && wl.Deadline().After(xr.at) {
		t.Fatalf("two holders: W, granted through the cut-off follower's stale copy, holds until %v after X's grant",
			wl.Deadline().Sub(xr.at).Round(time.Millisecond))
	}
}

// oldest returns the node with the lowest sequence suffix (the holder).
func oldest(kids []string) string {
	return slices.MinFunc(kids, func(a, b string) int {
		return strings.Compare(a[len(a)-10:], b[len(b)-10:])
	})
}
