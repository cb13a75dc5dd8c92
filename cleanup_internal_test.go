package locker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker/driver"
)

// cleanupLock is a stubLock that counts the calls a lost lease must make to
// free its entry on the backend.
type cleanupLock struct {
	stubLock
	releases atomic.Int32
	expires  chan struct{}
}

func (l *cleanupLock) Release(context.Context) error {
	l.releases.Add(1)
	return errors.New("backend unreachable")
}

func (l *cleanupLock) Expire(context.Context) { l.expires <- struct{}{} }

var _ driver.Expirer = (*cleanupLock)(nil)

// A lease lost through a failed refresh must still have its backend entry
// removed: a release is tried at once, and since it fails (the backend is
// unreachable), the lock's Expire runs once the local deadline passes — as it
// does for a lease whose deadline simply ran out. Without it an etcd key on a
// shared lease, or a ZooKeeper node in a live session, outlives the loss.
func TestRefresh_Failure_CleansUpEntry(t *testing.T) {
	ctx := context.Background()
	lock := &cleanupLock{stubLock: stubLock{refresh: context.DeadlineExceeded}, expires: make(chan struct{}, 4)}
	l, _ := New(&stub{acquire: grant(&lock.stubLock)})
	defer l.Close()
	// grant returns the embedded stubLock; hand out the wrapper instead.
	l.(*client).b = &stub{acquire: func(context.Context, *driver.Request) (driver.Lock, error) {
		lock.start = time.Now()
		return lock, nil
	}}
	lease, err := l.TryAcquire(ctx, "k", WithTTL(200*time.Millisecond), WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Refresh(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Refresh = %v, want ErrLeaseLost", err)
	}
	select {
	case <-lock.expires:
	case <-time.After(10 * time.Second):
		t.Fatalf("Expire never called after the lease was lost by a failed refresh (releases tried: %d)", lock.releases.Load())
	}
	if lock.releases.Load() == 0 {
		t.Error("no release was tried after the loss")
	}
}

// A grant that arrives after its own deadline is given back; if that release
// fails, the lock's Expire must run, or an entry the server does not expire
// by the TTL (an etcd key on a renewed shared lease) is held by nobody until
// the Locker closes. The real-server case is etcd's
// TestEtcd_LateGrantGiveBackFails_LockStillFreed.
func TestGiveBack_Failure_Expires(t *testing.T) {
	lock := &cleanupLock{expires: make(chan struct{}, 4)}
	l, _ := New(&stub{acquire: func(context.Context, *driver.Request) (driver.Lock, error) {
		lock.start = time.Now().Add(-time.Hour) // granted long after its deadline
		return lock, nil
	}})
	defer l.Close()
	if _, err := l.TryAcquire(context.Background(), "k", WithTTL(time.Second)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("TryAcquire of a late grant = %v, want ErrLeaseLost", err)
	}
	if lock.releases.Load() != 1 {
		t.Fatalf("releases tried: %d, want 1 give-back", lock.releases.Load())
	}
	select {
	case <-lock.expires:
	case <-time.After(10 * time.Second):
		t.Fatal("Expire never called after the give-back of a late grant failed")
	}
}
