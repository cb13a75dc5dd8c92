package zookeeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// A Publish changes the own node's data, which fires the lease's loss watch
// (a data watch) without ending the lease: a Refresh after it must not take
// the event for a deletion.
func TestPublish_ThenRefresh_LeaseStillHeld(t *testing.T) {
	l := dial(t, []string{testenv.ZooKeeper(t).Addr()}, freshRoot(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.TryAcquire(ctx, "k", locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Release(context.Background()) }()
	for i := range 10 {
		v := fmt.Sprint("v", i)
		if err := locker.Publish(ctx, lease, v); err != nil {
			t.Fatalf("Publish(%s): %v", v, err)
		}
		if err := lease.Refresh(ctx); err != nil {
			t.Fatalf("Refresh after Publish(%s): %v", v, err)
		}
		info, err := locker.Inspect(ctx, l, "k")
		if err != nil || info.Value != v || info.Token != lease.Token() {
			t.Fatalf("Inspect after Publish(%s) = %+v, %v", v, info, err)
		}
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("lease ended after Publish and Refresh: %v", err)
	}
}
