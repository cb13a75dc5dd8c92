package etcd_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/internal/testenv"
)

// watchBound is how long a change may take to be reported after the member
// the watch is on answers again: the client's reconnect backoff (grpc's,
// 1 s growing by 1.6) plus room for a loaded machine.
const watchBound = time.Minute

// TestEtcd_Watch_MemberRestart_ChangeMeanwhileReported kills the member a
// watch is on, changes the lock through the other members, and restarts
// the member. As the package says, the change is reported: the client
// resumes the watch from the last revision it saw and signals the change;
// or, if the member it returns to has no leader yet, it ends the watch, and
// a new watch and an inspection show the change. A change after the
// restart is reported the same way. A watch that stays open and silent
// fails.
func TestEtcd_Watch_MemberRestart_ChangeMeanwhileReported(t *testing.T) {
	c := testenv.EtcdCluster(t)
	h := newHarness(c.Addrs()...)
	leader := c.Leader(t)
	var member *testenv.Server // a follower, so the others keep their leader
	var others []string
	for _, n := range c.Nodes {
		if n != leader && member == nil {
			member = n
		} else {
			others = append(others, n.Addr())
		}
	}
	ctx := ctxFor(t, 5*time.Minute)
	_, b := newBackendLocker(t, h, []string{member.Addr()})
	w, in := b.(driver.Watcher), b.(driver.Inspector)
	changer := mustLocker(t, h, others)

	lease, err := changer.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	ch, err := w.Watch(ctx, "k")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}

	// reported waits for the watch to report a change that leaves the lock
	// held or not: a signal, or the channel's end and then a new watch and
	// an inspection. It returns the watch to go on with.
	reported := func(ch <-chan struct{}, held bool, what string) <-chan struct{} {
		t.Helper()
		deadline := time.After(watchBound)
		select {
		case _, open := <-ch:
			if open {
				t.Logf("%s: signalled on the open watch", what)
				if info, err := in.Inspect(ctx, "k"); err != nil || info.Held != held {
					t.Fatalf("%s: Inspect after the signal = %+v, %v; want held %v", what, info, err, held)
				}
				return ch
			}
		case <-deadline:
			t.Fatalf("%s: the watch neither signalled nor ended within %v", what, watchBound)
		}
		t.Logf("%s: the watch ended; watching again", what)
		for {
			next, err := w.Watch(ctx, "k")
			if err == nil {
				if info, err := in.Inspect(ctx, "k"); err != nil || info.Held != held {
					t.Fatalf("%s: Inspect after watching again = %+v, %v; want held %v", what, info, err, held)
				}
				return next
			}
			select {
			case <-deadline:
				t.Fatalf("%s: cannot watch again within %v: %v", what, watchBound, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	member.Kill(t)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release while a follower is down: %v", err)
	}
	member.Restart(t)
	ch = reported(ch, false, "release while the member was down")

	if _, err := changer.TryAcquire(ctx, "k"); err != nil {
		t.Fatalf("TryAcquire after the restart: %v", err)
	}
	reported(ch, true, "grant after the restart")
}

// TestEtcd_Watch_MemberCutOffFromLeader_Ends cuts the member a watch is on
// off its peers: the member loses its leader, and, as the package says,
// the watch ends rather than stay open and deaf to changes made through
// the majority. Once the member is back, a new watch follows the lock.
func TestEtcd_Watch_MemberCutOffFromLeader_Ends(t *testing.T) {
	c := testenv.EtcdCluster(t)
	h := newHarness(c.Addrs()...)
	leader := c.Leader(t)
	member := c.Nodes[0]
	if member == leader {
		member = c.Nodes[1]
	}
	ctx := ctxFor(t, 5*time.Minute)
	_, b := newBackendLocker(t, h, []string{member.Addr()})
	w := b.(driver.Watcher)
	ch, err := w.Watch(ctx, "k")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	member.Disconnect(t)
	deadline := time.After(watchBound)
	for ended := false; !ended; {
		select {
		case _, open := <-ch:
			ended = !open
		case <-deadline:
			t.Fatalf("the watch on a member cut off from its leader did not end within %v", watchBound)
		}
	}
	member.Reconnect(t)

	changer := mustLocker(t, h, h.endpoints)
	for {
		if ch, err = w.Watch(ctx, "k"); err == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("cannot watch again after the member came back: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := changer.TryAcquire(ctx, "k"); err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	select {
	case _, open := <-ch:
		if !open {
			t.Fatal("the new watch ended instead of signalling the grant")
		}
	case <-time.After(watchBound):
		t.Fatalf("the new watch did not signal the grant within %v", watchBound)
	}
}
