package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
	"go.uber.org/goleak"
)

// Run runs every subtest of the suite against h. Subtests whose capability
// the harness lacks are skipped, saying which.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h, ttl: h.TTL()}
	s.slack = s.ttl/2 + time.Second
	if sl, ok := h.(Slacker); ok {
		s.slack = sl.ExpirySlack()
	}
	// Warm up shared infrastructure (a container, a connection pool's
	// background goroutines) outside any leak-checked subtest.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := h.NewLocker(ctx, t)
	if err != nil {
		t.Fatalf("harness: NewLocker: %v", err)
	}
	// Optional abilities of the backend itself are probed once.
	_, err = locker.Inspect(ctx, l, "conformance/probe")
	s.inspects = !errors.Is(err, locker.ErrUnsupported)
	probe, err := l.TryAcquire(ctx, "conformance/probe-permits", locker.WithLimit(2))
	s.permits = !errors.Is(err, locker.ErrUnsupported)
	if err == nil {
		_ = probe.Release(ctx)
	}
	probe, err = l.TryAcquire(ctx, "conformance/probe-min-hold", locker.WithMinHold(time.Millisecond))
	s.minHolds = !errors.Is(err, locker.ErrUnsupported)
	if err == nil {
		_ = probe.Release(ctx)
	}
	probe, err = l.TryAcquire(ctx, "conformance/probe-value", locker.WithValue("probe"))
	s.publishes = !errors.Is(err, locker.ErrUnsupported)
	if err == nil {
		_ = probe.Release(ctx)
	}
	for _, err := range locker.Watch(ctx, l, "conformance/probe") {
		s.watches = !errors.Is(err, locker.ErrUnsupported)
		break
	}
	if err := l.Close(); err != nil {
		t.Fatalf("harness: Close: %v", err)
	}
	for _, st := range subtests {
		if st.needs != nil && !st.needs(s) {
			// Not a skip: the backend has no such ability (an in-process
			// store cannot be unreachable), so there is nothing to test.
			t.Logf("%s: not applicable, the harness lacks %s", st.name, st.capability)
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			s.checkLeaks(t)
			st.fn(t, s)
		})
	}
}

type subtest struct {
	name       string
	fn         func(t *testing.T, s *suite)
	capability string
	needs      func(*suite) bool
}

// subtests lists the suite in the order it runs; each file adds its own.
var subtests []subtest

func add(name string, fn func(*testing.T, *suite)) {
	subtests = append(subtests, subtest{name: name, fn: fn})
}

func addIf[C any](name, capability string, fn func(*testing.T, *suite)) {
	addWhen(name, capability, func(s *suite) bool { _, ok := s.h.(C); return ok }, fn)
}

func addWhen(name, capability string, needs func(*suite) bool, fn func(*testing.T, *suite)) {
	subtests = append(subtests, subtest{name: name, fn: fn, capability: capability, needs: needs})
}

type suite struct {
	h         Harness
	ttl       time.Duration
	slack     time.Duration
	inspects  bool // the backend implements driver.Inspector
	permits   bool // the backend implements driver.Permits
	watches   bool // the backend implements driver.Watcher
	publishes bool // the backend implements driver.Publisher
	minHolds  bool // the backend implements driver.MinHolds
}

// opTimeout bounds any single call the suite expects to succeed.
func (s *suite) opTimeout() time.Duration { return 10*s.ttl + 10*time.Second }

// ctx returns a context that ends after d or when the subtest ends.
func (s *suite) ctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// locker returns a new client, closed when the subtest ends.
func (s *suite) locker(t *testing.T, opts ...locker.Option) locker.Locker {
	t.Helper()
	l, err := s.h.NewLocker(s.ctx(t, s.opTimeout()), t, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// leakGrace is how long after a subtest's Lockers are closed its
// goroutines may take to end. Clients end some asynchronously: gRPC's
// Close returns before its transports' writer goroutines exit, which
// goleak's own retries (about 0.4 s) did not cover in a CI run at load 11
// (2026-12-01). A goroutine that never ends still fails.
const leakGrace = 10 * time.Second

// checkLeaks fails the subtest if goroutines it started outlive it. Its
// cleanup is registered first, so it runs after every Locker is closed.
func (s *suite) checkLeaks(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	if li, ok := s.h.(LeakIgnorer); ok {
		opts = append(opts, li.IgnoreLeaks()...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		give := time.Now().Add(leakGrace)
		for {
			err := goleak.Find(opts...)
			if err == nil {
				return
			}
			if time.Now().After(give) {
				t.Errorf("goroutines outlived the subtest's Lockers by %v: %v", leakGrace, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// key returns a key no other subtest or run uses.
func key(t *testing.T, suffix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "conformance/" + t.Name() + "/" + hex.EncodeToString(b[:]) + "/" + suffix
}

// tryAcquire takes k, which the test knows to be free. A grant that
// reached the caller after its own TTL is reported lost (ErrLeaseLost) and
// given back: TryAcquire does not try again, as Acquire does, so this
// helper does, a few times — a loaded machine can make one TryAcquire take
// a whole short TTL (a 3-member etcd cluster, load 60–85, 2026-12-04).
func (s *suite) tryAcquire(t *testing.T, l locker.Locker, k string, opts ...locker.Option) locker.Lease {
	t.Helper()
	lease, _, _ := s.tryLate(t, l, func() string { return k }, opts)
	return lease
}

// tryAcquireNew takes a new key (key(t, suffix)) and returns the lease, the
// key and when the attempt that took it began (its grant is no earlier).
// After a late grant (see tryAcquire) it tries a new key: a grant given
// back inside its minimum hold keeps its key taken until the hold ends.
func (s *suite) tryAcquireNew(t *testing.T, l locker.Locker, suffix string, opts ...locker.Option) (locker.Lease, string, time.Time) {
	t.Helper()
	return s.tryLate(t, l, func() string { return key(t, suffix) }, opts)
}

// lateGrantTries bounds the attempts of tryLate.
const lateGrantTries = 3

// tryLate is tryAcquire and tryAcquireNew: each attempt takes the key next
// returns, and a late grant (ErrLeaseLost) is tried again, up to
// lateGrantTries attempts in all.
func (s *suite) tryLate(t *testing.T, l locker.Locker, next func() string, opts []locker.Option) (locker.Lease, string, time.Time) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		k, asked := next(), time.Now()
		lease, err := l.TryAcquire(s.ctx(t, s.opTimeout()), k, opts...)
		if err == nil {
			return lease, k, asked
		}
		if !errors.Is(err, locker.ErrLeaseLost) || attempt == lateGrantTries {
			t.Fatalf("TryAcquire(%q): %v", k, err)
		}
		t.Logf("TryAcquire(%q), attempt %d: %v; trying again", k, attempt, err)
	}
}

func (s *suite) acquire(t *testing.T, l locker.Locker, k string, opts ...locker.Option) locker.Lease {
	t.Helper()
	lease, err := l.Acquire(s.ctx(t, s.opTimeout()), k, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", k, err)
	}
	return lease
}

func (s *suite) release(t *testing.T, lease locker.Lease) {
	t.Helper()
	if err := lease.Release(s.ctx(t, s.opTimeout())); err != nil {
		t.Fatalf("Release(%q): %v", lease.Key(), err)
	}
}

// waitDone waits for lease.Done within d.
func waitDone(t *testing.T, lease locker.Lease, d time.Duration, why string) {
	t.Helper()
	start := time.Now()
	select {
	case <-lease.Done():
		bounds.Took(t, "lease Done ("+why+")", time.Since(start), d)
	case <-time.After(d):
		t.Fatalf("lease %q: Done not closed within %v (%s)", lease.Key(), d, why)
	}
}

func isDone(lease locker.Lease) bool {
	select {
	case <-lease.Done():
		return true
	default:
		return false
	}
}
