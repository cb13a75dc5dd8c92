package etcd_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
)

// peerTTL is the lock TTL of the peer-partition tests: the shortest etcd
// grants (2 s, its minimum lease TTL rounded up), on a lease of 3 s.
const peerTTL = 2 * time.Second

// roles returns the index of the leader and of one follower of c.
func roles(t *testing.T, c *testenv.LinkedEtcdCluster) (leader, follower int) {
	t.Helper()
	l := c.Leader(t)
	leader, follower = -1, -1
	for i, n := range c.Nodes {
		switch {
		case n == l:
			leader = i
		case follower < 0:
			follower = i
		}
	}
	return leader, follower
}

// others returns the client addresses of every member of c but i.
func others(c *testenv.LinkedEtcdCluster, i int) []string {
	var a []string
	for j, n := range c.Nodes {
		if j != i {
			a = append(a, n.Addr())
		}
	}
	return a
}

// A holder whose client talks only to one member, which its peers then stop
// hearing and answering (packets dropped, connections open), must not hold
// a valid lease past the moment a client of the majority is granted the
// lock: its renewals through the cut-off member must fail, whether that
// member was a follower (it forwards renewals to a leader it no longer
// reaches) or the leader (it must not renew leases once it may have been
// deposed).
func TestEtcd_MemberIsolatedByPacketDrops_HolderThroughItLosesLeaseBeforeMajorityGrants(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		t.Run(role, func(t *testing.T) {
			t.Parallel()
			c := testenv.EtcdClusterLinked(t)
			leader, follower := roles(t, c)
			cut := follower
			if role == "leader" {
				cut = leader
			}
			h := newHarness(c.Addrs()...)
			a := mustLocker(t, h, []string{c.Nodes[cut].Addr()})
			b := mustLocker(t, h, others(c, cut))
			ctx := ctxFor(t, 60*time.Second)
			lease, err := a.Acquire(ctx, "k", locker.WithTTL(peerTTL), locker.WithAutoRefresh(true))
			if err != nil {
				t.Fatal(err)
			}
			c.Isolate(t, cut)
			isolated := time.Now()
			// Without the leader, the majority elects another first: until
			// then B's requests time out (ErrUnavailable), and B tries again.
			held, err := b.Acquire(ctx, "k", locker.WithTTL(peerTTL))
			for errors.Is(err, locker.ErrUnavailable) && ctx.Err() == nil {
				held, err = b.Acquire(ctx, "k", locker.WithTTL(peerTTL))
			}
			if err != nil {
				t.Fatalf("B's Acquire through the majority while A's %s is isolated: %v", role, err)
			}
			granted := time.Now()
			defer held.Release(ctx)
			t.Logf("B granted %v after the cut, token %d after A's %d", granted.Sub(isolated).Round(time.Millisecond), held.Token(), lease.Token())
			if held.Token() <= lease.Token() {
				t.Fatalf("B's token %d is not above A's %d", held.Token(), lease.Token())
			}
			if d := lease.Deadline(); lease.Err() == nil && d.After(granted) {
				t.Fatalf("B holds the lock while A's lease is still valid for %v after B's grant (A's renewals went on through the isolated %s)", d.Sub(granted).Round(time.Millisecond), role)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			err = lease.Refresh(rctx)
			cancel()
			if err == nil {
				t.Fatalf("A's refresh through the isolated %s succeeded %v after the cut, after B was granted the lock (A's deadline now %v after B's grant)",
					role, time.Since(isolated).Round(time.Millisecond), lease.Deadline().Sub(granted).Round(time.Millisecond))
			}
			t.Logf("A's refresh after B's grant: %v", err)
			if d := lease.Deadline(); d.After(granted) {
				t.Fatalf("A's deadline is %v after B's grant", d.Sub(granted))
			}
		})
	}
}

// One client per member contends for one lock, each holder writing to a
// fenced resource (the follower's client holds it 4 s, longer than its
// lease lives unrenewed; the others 0.2 s), while first the leader stops
// hearing a follower (it still sends to it), then the follower stops
// hearing the leader (it still sends to it), each cut made while the
// follower's client holds the lock. No grant may come while another
// holder's lease is valid, tokens must rise in grant order, and the two
// members that still form a majority must keep granting.
func TestEtcd_OneWayPeerCuts_NoTwoHoldersTokensRise(t *testing.T) {
	t.Parallel()
	c := testenv.EtcdClusterLinked(t)
	leader, follower := roles(t, c)
	h := newHarness(c.Addrs()...)
	guard := fencing.NewMemory()
	ctx := ctxFor(t, 80*time.Second)

	var (
		mu      sync.Mutex
		holders = make([]locker.Lease, len(c.Nodes)) // each worker's lease while it holds
		last    uint64                               // the highest token granted
		grants  []grant
	)
	wctx, stop := context.WithCancel(ctx) // the workers'
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		l := mustLocker(t, h, []string{n.Addr()})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				actx, cancel := context.WithTimeout(wctx, 5*time.Second)
				lease, err := l.Acquire(actx, "k", locker.WithTTL(peerTTL), locker.WithAutoRefresh(true))
				cancel()
				if err != nil {
					continue // the member may be cut off: try again
				}
				at := time.Now()
				mu.Lock()
				for j, o := range holders {
					if o != nil && o.Err() == nil && o.Deadline().After(at) {
						t.Errorf("member %d's client granted token %d while member %d's holder (token %d) is valid for %v more", i+1, lease.Token(), j+1, o.Token(), o.Deadline().Sub(at).Round(time.Millisecond))
					}
				}
				if lease.Token() <= last {
					t.Errorf("member %d's client granted token %d after token %d", i+1, lease.Token(), last)
				}
				last = max(last, lease.Token())
				holders[i] = lease
				grants = append(grants, grant{i, at})
				mu.Unlock()
				// The follower's client holds longer than the lease lives
				// unrenewed (T+R = 3 s), so that, cut off, it must have
				// lost it; stop early when told of a loss. Write through
				// the fence if still valid.
				hold := 200 * time.Millisecond
				if i == follower {
					hold = 2 * peerTTL
				}
				select {
				case <-time.After(hold):
				case <-lease.Done():
				case <-wctx.Done():
				}
				if lease.Err() == nil && time.Now().Before(lease.Deadline()) {
					if err := guard.Write(ctx, "r", lease.Token(), func() error { return nil }); err != nil && !errors.Is(err, fencing.ErrStaleToken) {
						t.Errorf("fenced write: %v", err)
					}
				}
				mu.Lock()
				holders[i] = nil
				mu.Unlock()
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_ = lease.Release(rctx)
				cancel()
			}
		}()
	}
	defer func() { stop(); wg.Wait() }() // before t.Fatalf returns
	window := func(name string, d time.Duration, fault func()) {
		// Cut while the follower's client holds the lock: its holder is
		// the one that must lose it.
		for held := false; !held; time.Sleep(50 * time.Millisecond) {
			if ctx.Err() != nil {
				t.Fatalf("%s: the follower's client never held the lock", name)
			}
			mu.Lock()
			held = holders[follower] != nil
			mu.Unlock()
		}
		fault()
		from := time.Now()
		time.Sleep(d)
		to := time.Now()
		c.Heal(t)
		mu.Lock()
		n := 0
		for _, g := range grants {
			if g.member != follower && g.at.After(from) && g.at.Before(to) {
				n++
			}
		}
		mu.Unlock()
		t.Logf("%s: %d grants to the majority's clients in %v", name, n, d)
		if n == 0 {
			t.Errorf("%s: the majority granted nothing in %v", name, d)
		}
	}
	window("leader not hearing the follower", 8*time.Second, func() { c.Cut(t, follower, leader) })
	window("follower not hearing the leader", 8*time.Second, func() { c.Cut(t, leader, follower) })
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d grants in all, last token %d", len(grants), last)
}

type grant struct {
	member int
	at     time.Time
}
