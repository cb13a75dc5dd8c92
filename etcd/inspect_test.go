package etcd_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
)

// newBackendLocker returns a Locker of the harness's prefix (and opts) and
// its backend, closed when t ends.
func newBackendLocker(t *testing.T, h *harness, endpoints []string, opts ...locker.Option) (locker.Locker, driver.Backend) {
	t.Helper()
	l, b, err := etcd.NewWithBackend(h.newClient(t, endpoints...), append([]locker.Option{etcd.WithPrefix(h.prefix), etcd.WithRequestTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("NewWithBackend: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, b
}

// TestEtcd_ListPages_EachLockOnceWithItsWaiters pages through a Locker's
// locks two keys at a time: a lock whose keys (holder and waiters) run past
// a page is reported whole, once, and the keys of a Locker whose prefix
// extends this one are not reported.
func TestEtcd_ListPages_EachLockOnceWithItsWaiters(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	ctx := ctxFor(t, time.Minute)
	a, b := newBackendLocker(t, h, nil, locker.WithOwner("lister"))
	in := b.(driver.Inspector)
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	tokens := map[string]uint64{}
	for _, k := range keys {
		lease, err := a.TryAcquire(ctx, k)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", k, err)
		}
		tokens[k] = lease.Token()
	}
	// A Locker whose prefix extends a's by "k2/" writes keys inside a's
	// etcd range: they are not a's locks.
	nested, err := etcd.New(h.newClient(t), etcd.WithPrefix(h.prefix+"k2/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nested.Close() })
	if _, err := nested.TryAcquire(ctx, "x"); err != nil {
		t.Fatalf("nested TryAcquire: %v", err)
	}
	// Three waiters queue on k3, so its four keys span two pages.
	waiter := mustLocker(t, h, h.endpoints)
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 3)
	for range 3 {
		go func() { _, err := waiter.Acquire(wctx, "k3"); waited <- err }()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-waited; !errors.Is(err, context.Canceled) {
				t.Errorf("a cancelled waiter returned %v", err)
			}
		}
	})
	for {
		info, err := in.Inspect(ctx, "k3")
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Waiters == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := in.List(ctx, "", cursor, 2)
		if err != nil {
			t.Fatalf("List page %d: %v", pages, err)
		}
		pages++
		if len(page) > 2 {
			t.Fatalf("List page %d with limit 2 returned %d locks", pages, len(page))
		}
		for _, info := range page {
			if !info.Held || info.Token != tokens[info.Key] || info.Label != "lister" || info.TTL <= 0 || info.TTL > locker.DefaultTTL {
				t.Errorf("List yielded %+v, want held by lister with token %d and at most %v left", info, tokens[info.Key], locker.DefaultTTL)
			}
			if want := map[bool]int{true: 3, false: 0}[info.Key == "k3"]; info.Waiters != want {
				t.Errorf("List: %s has %d waiters, want %d", info.Key, info.Waiters, want)
			}
			got = append(got, info.Key)
		}
		if next == "" {
			break
		}
		if pages > 20 {
			t.Fatalf("List does not end: cursor %q after %d pages", next, pages)
		}
		cursor = next
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("List in pages of two = %q, want %q", got, keys)
	}
}
