package zookeeper_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// A refresh answered through a follower that is cut off from its peers
// right after: the leader heard of the session's requests only through
// that follower's ping replies, and the reply that would have carried the
// refresh's touch never reaches it. The leader then expires the session S
// after an older touch, and grants the lock to X on the other members. H's
// lease must end no later than X's grant. Before the fix, H's deadline
// counted from the refresh's sync, and a loaded run's history check saw H
// and X overlap by 188 ms. This test saw X granted 60–453 ms before H's
// deadline in 6 of 8 trials then (2 runs of 4); with H's validity counted
// from a sync whose touch has reached the leader (touch.go), 561–764 ms
// after it in 8 of 8.
func TestStaleFollower_RefreshThroughCutOffFollower_EndsBeforeNextGrant(t *testing.T) {
	e := testenv.ZooKeeperEnsembleLinked(t)
	defer e.Heal(t)
	follower, others := aFollower(t, e)
	f := e.Nodes[follower]
	root := freshRoot(t)
	x := dial(t, others, root)
	ctx := ctxT(t, 3*time.Minute)
	for trial := range 4 {
		key := fmt.Sprintf("k%d", trial)
		h := dial(t, []string{f.Addr()}, root)
		lease, err := h.TryAcquire(ctx, key, locker.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		// Anywhere in the client's ping cycle (go-zookeeper pings every
		// S/3), so that the leader's last touch before the refresh is of
		// any age up to S/3.
		time.Sleep(testTTL/4 + rand.N(testTTL/3))
		if err := lease.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		e.Isolate(t, follower)
		deadline := lease.Deadline()
		xl, err := x.Acquire(ctx, key)
		granted := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if granted.Before(deadline) {
			t.Errorf("trial %d: X was granted %v before H's deadline, which the refresh through the cut-off follower set", trial, deadline.Sub(granted))
		} else {
			t.Logf("trial %d: X granted %v after H's deadline", trial, granted.Sub(deadline))
		}
		_ = xl.Release(ctx)
		e.Heal(t)
		_ = h.Close()
	}
}
