package locker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/driver"
)

// stub is a scripted backend for the portable layer's own tests; backends
// themselves are tested against real servers.
type stub struct {
	round   func(time.Duration) (time.Duration, error)
	acquire func(context.Context, *driver.Request) (driver.Lock, error)
}

func (s *stub) Name() string { return "stub" }
func (s *stub) Close() error { return nil }
func (s *stub) TryAcquire(ctx context.Context, r *driver.Request) (driver.Lock, error) {
	return s.acquire(ctx, r)
}
func (s *stub) Acquire(ctx context.Context, r *driver.Request) (driver.Lock, error) {
	return s.acquire(ctx, r)
}

type roundingStub struct{ stub }

func (s *roundingStub) RoundTTL(d time.Duration) (time.Duration, error) { return s.round(d) }

type stubLock struct {
	start   time.Time
	refresh error
	release error
	ttls    []time.Duration
}

func (l *stubLock) Token() uint64    { return 7 }
func (l *stubLock) Start() time.Time { return l.start }
func (l *stubLock) Refresh(_ context.Context, ttl time.Duration) error {
	l.ttls = append(l.ttls, ttl)
	return l.refresh
}
func (l *stubLock) Release(context.Context) error { return l.release }

func grant(l *stubLock) func(context.Context, *driver.Request) (driver.Lock, error) {
	return func(context.Context, *driver.Request) (driver.Lock, error) { l.start = time.Now(); return l, nil }
}

func TestWrapError_Classifies(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	netErr := errors.New("dial tcp 127.0.0.1:1: connection refused")
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		is   []error
		not  []error
	}{
		{"engine error", live, netErr, []error{ErrUnavailable, netErr}, []error{ErrLocked, context.Canceled}},
		{"locked", live, ErrLocked, []error{ErrLocked}, []error{ErrUnavailable}},
		{"internal timeout, caller live", live, context.DeadlineExceeded, []error{ErrUnavailable}, nil},
		{"caller cancelled", ended, context.Canceled, []error{context.Canceled}, []error{ErrUnavailable}},
		{"caller cancelled, engine failed", ended, netErr, []error{context.Canceled, ErrUnavailable, netErr}, []error{ErrLocked}},
	}
	for _, c := range cases {
		err := wrapError(c.ctx, "stub", "acquire", "job1", c.err)
		for _, want := range c.is {
			if !errors.Is(err, want) {
				t.Errorf("%s: %v does not match %v", c.name, err, want)
			}
		}
		for _, bad := range c.not {
			if errors.Is(err, bad) {
				t.Errorf("%s: %v matches %v", c.name, err, bad)
			}
		}
		if !strings.HasPrefix(err.Error(), `stub: acquire "job1": `) {
			t.Errorf("%s: %q does not name the backend, operation and key", c.name, err)
		}
	}
}

func TestTTLRounder_RoundsUpOrRefuses(t *testing.T) {
	ctx := context.Background()
	lock := &stubLock{}
	b := &roundingStub{stub{acquire: grant(lock)}}
	b.round = func(d time.Duration) (time.Duration, error) { return d.Round(time.Second) + time.Second, nil }
	l, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "k", WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lock.ttls; len(got) != 1 || got[0] != 3*time.Second {
		t.Fatalf("refresh used TTLs %v, want the rounded-up 3s", got)
	}

	b.round = func(d time.Duration) (time.Duration, error) { return d / 2, nil }
	if _, err := l.TryAcquire(ctx, "k2", WithTTL(4*time.Second)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("a backend that shortens the TTL: %v, want ErrInvalidOption", err)
	}
	b.round = func(time.Duration) (time.Duration, error) { return 0, errors.New("below the server minimum") }
	if _, err := l.TryAcquire(ctx, "k3", WithTTL(time.Second)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("a TTL the backend refuses: %v, want ErrInvalidOption", err)
	}
	if _, err := New(b); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("New with a default TTL the backend refuses: %v, want ErrInvalidOption", err)
	}
}

func TestRefresh_Failure_EndsLease(t *testing.T) {
	ctx := context.Background()
	for name, cause := range map[string]error{
		"ambiguous": context.DeadlineExceeded,
		"engine":    errors.New("connection reset"),
		"other":     ErrLeaseLost,
	} {
		lock := &stubLock{refresh: cause}
		l, _ := New(&stub{acquire: grant(lock)})
		lease, err := l.TryAcquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		err = lease.Refresh(ctx)
		if !errors.Is(err, ErrLeaseLost) || !errors.Is(lease.Err(), ErrLeaseLost) {
			t.Errorf("%s: Refresh = %v, Err = %v; want ErrLeaseLost", name, err, lease.Err())
		}
		select {
		case <-lease.Done():
		default:
			t.Errorf("%s: Done open after a failed refresh", name)
		}
		l.Close()
	}
}

func TestRelease_UnknownOutcome_KeepsLease(t *testing.T) {
	ctx := context.Background()
	lock := &stubLock{release: errors.New("i/o timeout")}
	l, _ := New(&stub{acquire: grant(lock)})
	defer l.Close()
	lease, _ := l.TryAcquire(ctx, "k")
	if err := lease.Release(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Release = %v, want ErrUnavailable", err)
	}
	if lease.Err() != nil {
		t.Fatalf("Err = %v after a release of unknown outcome; want the lease kept so Release can be retried", lease.Err())
	}
	lock.release = nil
	if err := lease.Release(ctx); err != nil || !errors.Is(lease.Err(), ErrReleased) {
		t.Fatalf("retried Release = %v, Err = %v", err, lease.Err())
	}
}

func TestAcquire_LostBeforeStart_ReleasesAndFails(t *testing.T) {
	lock := &stubLock{}
	released := false
	b := &stub{acquire: func(_ context.Context, r *driver.Request) (driver.Lock, error) {
		lock.start = time.Now()
		r.Lost(errors.New("session expired"))
		return &releaseSpy{stubLock: lock, released: &released}, nil
	}}
	l, _ := New(b)
	defer l.Close()
	if _, err := l.TryAcquire(context.Background(), "k"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("TryAcquire = %v, want ErrLeaseLost", err)
	}
	if !released {
		t.Fatal("the granted lock was not released")
	}
}

type releaseSpy struct {
	*stubLock
	released *bool
}

func (r *releaseSpy) Release(context.Context) error { *r.released = true; return nil }

func TestClose_CancelsInFlightAcquire(t *testing.T) {
	block := make(chan struct{})
	b := &stub{acquire: func(ctx context.Context, _ *driver.Request) (driver.Lock, error) {
		close(block)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	l, _ := New(b)
	errc := make(chan error, 1)
	go func() { _, err := l.Acquire(context.Background(), "k"); errc <- err }()
	<-block
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight Acquire after Close = %v, want ErrClosed", err)
	}
}

func TestOptions_Invalid(t *testing.T) {
	b := &stub{}
	for name, opt := range map[string]Option{
		"zero TTL":        WithTTL(0),
		"long owner":      WithOwner(strings.Repeat("o", MaxKeyLen+1)),
		"NUL namespace":   WithNamespace("a\x00"),
		"long namespace":  WithNamespace(strings.Repeat("n", MaxKeyLen+1)),
		"negative hold":   WithMinHold(-time.Second),
		"long value":      WithValue(strings.Repeat("v", MaxValue+1)),
		"non-UTF-8 value": WithValue("\xff"),
	} {
		if _, err := New(b, opt); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(%s) = %v, want ErrInvalidOption", name, err)
		}
	}
}

// A backend without an ability refuses it per acquisition, before any
// request reaches it.
func TestAbilities_UnsupportedRefused(t *testing.T) {
	b := &stub{acquire: func(context.Context, *driver.Request) (driver.Lock, error) {
		t.Fatal("the backend was asked for an ability it lacks")
		return nil, nil
	}}
	l, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, opt := range map[string]Option{
		"WithLimit(2)":    WithLimit(2),
		"WithValue(v)":    WithValue("v"),
		"WithMinHold(1s)": WithMinHold(time.Second),
	} {
		if _, err := l.TryAcquire(context.Background(), "k", opt); !errors.Is(err, ErrUnsupported) {
			t.Errorf("TryAcquire with %s on a backend without it = %v, want ErrUnsupported", name, err)
		}
	}
}

func TestStoredKey_NamespacesNeverCollide(t *testing.T) {
	seen := map[string][2]string{}
	for _, ns := range []string{"", "a", "a/b", "ab"} {
		for _, k := range []string{"b/c", "c", "bc", "a/b/c"} {
			s := storedKey(ns, k)
			if prev, dup := seen[s]; dup {
				t.Errorf("(%q,%q) and (%q,%q) both store as %q", prev[0], prev[1], ns, k, s)
			}
			seen[s] = [2]string{ns, k}
		}
	}
}

// lateThen grants locks that start a TTL in the past (granted after their
// own deadline) late times, then on time; it counts grants and releases.
type lateThen struct {
	late, grants, releases int
}

func (s *lateThen) acquire(_ context.Context, r *driver.Request) (driver.Lock, error) {
	s.grants++
	start := time.Now()
	if s.grants <= s.late {
		start = start.Add(-2 * r.TTL)
	}
	return &countedRelease{stubLock: &stubLock{start: start}, n: &s.releases}, nil
}

type countedRelease struct {
	*stubLock
	n *int
}

func (r *countedRelease) Release(context.Context) error { *r.n++; return nil }

func TestAcquire_LateGrant_GivenBackAndRetried(t *testing.T) {
	s := &lateThen{late: 2}
	l, _ := New(&stub{acquire: s.acquire})
	defer l.Close()
	lease, err := l.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatalf("Acquire = %v, want a lease after two late grants", err)
	}
	defer lease.Release(context.Background())
	if s.grants != 3 || s.releases != 2 {
		t.Fatalf("grants = %d, releases = %d; want 3 grants, the 2 late ones given back", s.grants, s.releases)
	}
}

func TestAcquire_AlwaysLate_FailsAfterBoundedRetries(t *testing.T) {
	s := &lateThen{late: 1 << 30}
	l, _ := New(&stub{acquire: s.acquire})
	defer l.Close()
	if _, err := l.Acquire(context.Background(), "k"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Acquire = %v, want ErrLeaseLost", err)
	}
	if s.grants != lateGrantAttempts || s.releases != lateGrantAttempts {
		t.Fatalf("grants = %d, releases = %d; want %d of each", s.grants, s.releases, lateGrantAttempts)
	}
}

func TestTryAcquire_LateGrant_NotRetried(t *testing.T) {
	s := &lateThen{late: 1}
	l, _ := New(&stub{acquire: s.acquire})
	defer l.Close()
	if _, err := l.TryAcquire(context.Background(), "k"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("TryAcquire = %v, want ErrLeaseLost", err)
	}
	if s.grants != 1 || s.releases != 1 {
		t.Fatalf("grants = %d, releases = %d; want 1 of each", s.grants, s.releases)
	}
}
