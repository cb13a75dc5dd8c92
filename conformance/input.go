package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
)

func init() {
	add("Keys_Invalid_ReturnErrInvalidKey", testInvalidKeys)
	add("Keys_Unusual_AreDistinctLocks", testUnusualKeys)
	add("Namespaces_AreIndependent", testNamespaces)
	add("Options_BadTTL_ReturnErrInvalidOption", testBadTTL)
	add("Close_EndsLeases_ThenErrClosed", testClose)
	addIf[Unreachabler]("Unreachable_ReturnsErrUnavailable", "Unreachabler", testUnreachable)
}

func testInvalidKeys(t *testing.T, s *suite) {
	l := s.locker(t)
	ctx := s.ctx(t, s.opTimeout())
	bad := map[string]string{
		"empty":         "",
		"1025 bytes":    strings.Repeat("k", locker.MaxKeyLen+1),
		"invalid UTF-8": "a\xffb",
		"NUL":           "a\x00b",
	}
	fn := func(context.Context, locker.Lease) error {
		t.Error("Do ran its function for an invalid key")
		return nil
	}
	for name, k := range bad {
		if _, err := l.TryAcquire(ctx, k); !errors.Is(err, locker.ErrInvalidKey) {
			t.Errorf("TryAcquire(%s) = %v, want ErrInvalidKey", name, err)
		}
		if _, err := l.Acquire(ctx, k); !errors.Is(err, locker.ErrInvalidKey) {
			t.Errorf("Acquire(%s) = %v, want ErrInvalidKey", name, err)
		}
		if err := locker.Do(ctx, l, k, fn); !errors.Is(err, locker.ErrInvalidKey) {
			t.Errorf("Do(%s) = %v, want ErrInvalidKey", name, err)
		}
	}
}

// unusualKeys are keys that naive encodings confuse: path separators and
// dots, quoting and injection characters, hash tags, glob and LIKE
// metacharacters, case, Unicode normalisation forms, control characters.
var unusualKeys = []string{
	"a", "A", "a/b", "a/", "/a", "a//b", ".", "..", "../a", "a/../b",
	"'; DROP TABLE x; --", `"q"`, `a\b`, "{a}", "{", "}", "a}b{",
	"%", "_", "a%b", "a_b", "*", "?", "[a]", "a b", "a\tb", "a\nb", "a\x01b",
	"é", "e\u0301", "ключ", "鍵", "🔒", "a:b", "a.b", "-- ", "KEYS *", "redis.call('del','x')",
}

func testUnusualKeys(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	prefix := key(t, "")
	keys := make([]string, 0, len(unusualKeys)+2)
	for _, k := range unusualKeys {
		keys = append(keys, prefix+k)
	}
	keys = append(keys, unusualKeys[0]+prefix)                                    // the prefix in the middle
	keys = append(keys, prefix+strings.Repeat("x", locker.MaxKeyLen-len(prefix))) // the longest key

	var leases []locker.Lease
	for _, k := range keys {
		// Each key must be free even though all the others are held: no two
		// map to the same lock.
		// Refreshed: holding them all takes many round trips.
		leases = append(leases, s.tryAcquire(t, a, k, locker.WithAutoRefresh(true)))
	}
	for _, k := range keys {
		if l, err := b.TryAcquire(s.ctx(t, s.opTimeout()), k); !errors.Is(err, locker.ErrLocked) {
			if l != nil {
				_ = l.Release(s.ctx(t, s.opTimeout()))
			}
			t.Errorf("TryAcquire(%q) by another client = %v, want ErrLocked", k, err)
		}
	}
	for _, lease := range leases {
		s.release(t, lease)
	}
	for _, k := range keys {
		s.release(t, s.tryAcquire(t, b, k))
	}
}

func testNamespaces(t *testing.T, s *suite) {
	ns := key(t, "ns")
	k := "k"
	one := s.locker(t, locker.WithNamespace(ns+"1"))
	oneAgain := s.locker(t, locker.WithNamespace(ns+"1"))
	two := s.locker(t, locker.WithNamespace(ns+"2"))
	none := s.locker(t)

	held := s.tryAcquire(t, one, k)
	if _, err := oneAgain.TryAcquire(s.ctx(t, s.opTimeout()), k); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("same namespace, same key: %v, want ErrLocked", err)
	}
	for name, k := range map[string]string{
		"other namespace":                k,
		"no namespace, bare key":         k,
		"no namespace, namespace/key":    ns + "1/" + k,
		"no namespace, namespace+key":    ns + "1" + k,
		"other namespace, namespace/key": ns + "1/" + k,
	} {
		l := two
		if strings.HasPrefix(name, "no namespace") {
			l = none
		}
		lease, err := l.TryAcquire(s.ctx(t, s.opTimeout()), k)
		if err != nil {
			t.Fatalf("%s: TryAcquire(%q) = %v, want the lock (namespaces are independent)", name, k, err)
		}
		s.release(t, lease)
	}
	s.release(t, held)

	if _, err := s.h.NewLocker(s.ctx(t, s.opTimeout()), t, locker.WithNamespace("a\x00b")); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("NewLocker with a NUL in the namespace = %v, want ErrInvalidOption", err)
	}
}

func testBadTTL(t *testing.T, s *suite) {
	l := s.locker(t)
	ctx := s.ctx(t, s.opTimeout())
	k := key(t, "k")
	for _, ttl := range []time.Duration{0, -time.Second, time.Nanosecond, locker.MinTTL - 1} {
		if lease, err := l.TryAcquire(ctx, k, locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidOption) {
			if lease != nil {
				_ = lease.Release(ctx)
			}
			t.Errorf("TryAcquire with TTL %v = %v, want ErrInvalidOption", ttl, err)
		}
		if _, err := s.h.NewLocker(ctx, t, locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("NewLocker with TTL %v = %v, want ErrInvalidOption", ttl, err)
		}
	}
	// The key was never taken by the refused calls.
	s.release(t, s.tryAcquire(t, l, k))
}

func testClose(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := s.tryAcquire(t, a, k)
	if err := a.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if !isDone(lease) {
		t.Fatal("a lease's Done is open after its Locker closed")
	}
	if err := lease.Err(); !errors.Is(err, locker.ErrLeaseLost) || !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Err() after Close = %v, want ErrLeaseLost and ErrClosed", err)
	}
	ctx := s.ctx(t, s.opTimeout())
	if _, err := a.TryAcquire(ctx, k); !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Acquire(ctx, k); !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	// Close released the lock where it could.
	s.release(t, s.tryAcquire(t, b, k))
}

func testUnreachable(t *testing.T, s *suite) {
	const wait = 3 * time.Second
	check := func(op string, start time.Time, err error, orDeadline bool) {
		t.Helper()
		switch {
		case err == nil:
			t.Fatalf("%s on an unreachable backend succeeded", op)
		case errors.Is(err, locker.ErrLocked):
			t.Fatalf("%s on an unreachable backend reported ErrLocked: %v", op, err)
		case !errors.Is(err, locker.ErrUnavailable) && !(orDeadline && errors.Is(err, context.DeadlineExceeded)):
			t.Fatalf("%s on an unreachable backend = %v, want ErrUnavailable", op, err)
		}
		// The bound is the second after the context's deadline: an
		// operation that waits for the deadline is not near it, one that
		// overruns the deadline by half a second is.
		elapsed := time.Since(start)
		bounds.Took(t, op+" on an unreachable backend, past its context's deadline", elapsed-wait, time.Second)
		if elapsed > wait+time.Second {
			t.Fatalf("%s returned after %v, past the context's deadline %v", op, elapsed, wait)
		}
	}
	start := time.Now()
	l, err := s.h.(Unreachabler).NewUnreachableLocker(s.ctx(t, wait), t)
	if err != nil {
		check("NewUnreachableLocker", start, err, false)
		return
	}
	defer l.Close()
	start = time.Now()
	_, err = l.TryAcquire(s.ctx(t, wait), key(t, "k"))
	check("TryAcquire", start, err, false)
	// A blocking Acquire may keep trying until its context ends.
	start = time.Now()
	_, err = l.Acquire(s.ctx(t, wait), key(t, "k"))
	check("Acquire", start, err, true)
}
