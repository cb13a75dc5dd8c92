package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker/driver"
)

// refreshLock is a stub lock that counts refreshes and notes any that reach
// the driver after the lock was released or its Locker closed.
type refreshLock struct {
	start     time.Time
	fail      error // what Refresh returns
	refreshes *atomic.Int64
	late      *atomic.Int64 // refreshes after the end
	over      atomic.Bool
}

func (l *refreshLock) Token() uint64    { return 7 }
func (l *refreshLock) Start() time.Time { return l.start }
func (l *refreshLock) Refresh(context.Context, time.Duration) error {
	if l.over.Load() {
		l.late.Add(1)
	}
	l.refreshes.Add(1)
	return l.fail
}
func (l *refreshLock) Release(context.Context) error { l.over.Store(true); return nil }

// refreshStub grants refreshLocks and keeps them, to end them all on Close.
type refreshStub struct {
	stub
	mu              sync.Mutex
	locks           []*refreshLock
	fail            error
	refreshes, late atomic.Int64
}

func newRefreshStub(fail error) *refreshStub {
	s := &refreshStub{fail: fail}
	s.acquire = func(context.Context, *driver.Request) (driver.Lock, error) {
		l := &refreshLock{start: time.Now(), fail: s.fail, refreshes: &s.refreshes, late: &s.late}
		s.mu.Lock()
		s.locks = append(s.locks, l)
		s.mu.Unlock()
		return l, nil
	}
	return s
}

// Close marks every lock over: once the Locker closed, no refresh may reach
// the backend.
func (s *refreshStub) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.locks {
		l.over.Store(true)
	}
	return nil
}

// Automatic refreshes run on timers that fire while the holder releases and
// while the Locker closes: no refresh reaches the driver after the driver's
// release of that lock succeeded, nor after Close, which waits for the
// refreshes under way.
func TestAutoRefresh_NoRefreshAfterReleaseOrClose(t *testing.T) {
	ctx := context.Background()
	s := newRefreshStub(nil)
	const ttl = 60 * time.Millisecond // a refresh every 20 ms
	l, err := New(s, WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]Lease, 200)
	for i := range leases {
		// A grant that returns after its own 60 ms deadline is refused as
		// lost (errLateGrant): a loaded fresh-clone run (2026-12-02) saw
		// one. It is not what this test is about, so another key is tried.
		for tries := 1; ; tries++ {
			leases[i], err = l.TryAcquire(ctx, fmt.Sprintf("k%d-%d", i, tries))
			if err == nil {
				break
			}
			if !errors.Is(err, errLateGrant) || tries == 10 {
				t.Fatal(err)
			}
		}
	}
	// Let the timers run a while, so that releases meet refreshes under way.
	for t0 := time.Now(); s.refreshes.Load() < int64(len(leases)) && time.Since(t0) < 10*time.Second; {
		time.Sleep(ttl / 3)
	}
	var wg sync.WaitGroup
	for _, lease := range leases[:len(leases)/2] {
		wg.Go(func() {
			// A release racing a refresh may find the lease lost on a loaded
			// machine (its deadline passed); either way it is over.
			if err := lease.Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // a timer left armed would fire meanwhile
	if n := s.late.Load(); n != 0 {
		t.Fatalf("%d refreshes reached the driver after Release or Close", n)
	}
}

// A failed automatic refresh ends the lease as lost, blaming the refresh, and
// no refresh follows it.
func TestAutoRefresh_Failure_EndsLeaseAndStops(t *testing.T) {
	ctx := context.Background()
	s := newRefreshStub(errors.New("connection reset"))
	const ttl = 3 * time.Second // the failed refresh at 1 s comes well before the deadline
	l, err := New(s, WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	if err := lease.Err(); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Err = %v, want ErrLeaseLost for the failed refresh", err)
	}
	time.Sleep(2 * ttl / 3) // two more refresh intervals
	if n := s.refreshes.Load(); n != 1 {
		t.Fatalf("%d refreshes, want the failed one alone", n)
	}
}

// slowRefreshLock's refreshes take slow, or fail when their context ends
// first, as a backend's request does.
type slowRefreshLock struct {
	start time.Time
	slow  time.Duration
	done  chan error // each refresh's outcome
}

func (l *slowRefreshLock) Token() uint64    { return 7 }
func (l *slowRefreshLock) Start() time.Time { return l.start }
func (l *slowRefreshLock) Refresh(ctx context.Context, _ time.Duration) error {
	var err error
	select {
	case <-time.After(l.slow):
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.done <- err
	return err
}
func (l *slowRefreshLock) Release(context.Context) error { return nil }

// An automatic refresh may take longer than the refresh interval (a third
// of the TTL): the lease stays valid until its deadline, and a refresh
// that succeeds before it keeps the lease. A loaded CI run's etcd cluster
// took past 667 ms, the interval of the suite's 2 s TTL, to answer one
// refresh, and the lease ended with 1.3 s of its validity left.
func TestAutoRefresh_SlowerThanTheInterval_KeepsLease(t *testing.T) {
	const ttl = 6 * time.Second // a refresh every 2 s, its lease valid 4 s more
	lock := &slowRefreshLock{slow: ttl / 2, done: make(chan error, 8)}
	s := &stub{acquire: func(context.Context, *driver.Request) (driver.Lock, error) {
		lock.start = time.Now()
		return lock, nil
	}}
	l, err := New(s, WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-lock.done; err != nil {
		t.Fatalf("the refresh that takes %v was cut off: %v", lock.slow, err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("after a refresh that succeeded within the lease's validity, Err = %v", err)
	}
}
