package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/memory"
)

// FuzzKeys: the memory backend takes any key as given. Two Lockers over one
// Store, each in its own namespace ("" for none), take keys k1 and k2: an
// invalid key is refused with ErrInvalidKey before the Store sees it; the
// same (namespace, key) is one lock (ErrLocked); any other pair is two
// independent locks — nothing nests, collides or panics. The Store reports
// the holder under the stored name, and keeps nothing once both are
// released.
func FuzzKeys(f *testing.F) {
	f.Add("", "a", "", "a")
	f.Add("", "a", "", "a/b")
	f.Add("", "..", "", "../")
	f.Add("ns", "k", "", "ns\x00k")
	f.Add("ns", "k", "ns", "k")
	f.Add("a", "b/c", "a/b", "c")
	f.Add("", "'; DROP TABLE locks; --", "", `"quoted"`)
	f.Add("", "%", "", "%25")
	f.Add("", "\xff", "", "ok")
	f.Add("", "", "", "a\x00")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, ns1, k1, ns2, k2 string) {
		store := memory.NewStore()
		a, errA := memory.New(store, locker.WithNamespace(ns1))
		b, errB := memory.New(store, locker.WithNamespace(ns2))
		for _, c := range []struct {
			l   locker.Locker
			err error
			ns  string
		}{{a, errA, ns1}, {b, errB, ns2}} {
			if c.err == nil {
				defer c.l.Close()
			} else if c.ns == "" || locker.ValidateKey(c.ns) == nil || !errors.Is(c.err, locker.ErrInvalidOption) {
				t.Fatalf("New(namespace %q) = %v, want ErrInvalidOption only for an invalid namespace", c.ns, c.err)
			}
		}
		if errA != nil || errB != nil {
			return
		}
		l1, err1 := a.TryAcquire(ctx, k1)
		if v := locker.ValidateKey(k1); v != nil {
			if !errors.Is(err1, locker.ErrInvalidKey) {
				t.Fatalf("TryAcquire(%q) = %v, want ErrInvalidKey", k1, err1)
			}
			if n := store.Pending(); n != 0 {
				t.Fatalf("an invalid key left state for %d keys", n)
			}
			return
		}
		if err1 != nil {
			t.Fatalf("TryAcquire(%q) on an empty store = %v", k1, err1)
		}
		stored := k1
		if ns1 != "" {
			stored = ns1 + "\x00" + k1
		}
		if h, ok := store.Holder(stored); !ok || h.Token != l1.Token() {
			t.Fatalf("Holder(%q) = %+v, %v; want token %d", stored, h, ok, l1.Token())
		}
		l2, err2 := b.TryAcquire(ctx, k2)
		same := ns1 == ns2 && k1 == k2
		switch {
		case locker.ValidateKey(k2) != nil:
			if !errors.Is(err2, locker.ErrInvalidKey) {
				t.Fatalf("TryAcquire(%q) = %v, want ErrInvalidKey", k2, err2)
			}
		case same:
			if !errors.Is(err2, locker.ErrLocked) {
				t.Fatalf("(%q, %q) taken twice: %v", ns1, k1, err2)
			}
		case err2 != nil:
			t.Fatalf("(%q, %q) held; TryAcquire of the distinct (%q, %q) = %v", ns1, k1, ns2, k2, err2)
		default:
			if err := l2.Release(ctx); err != nil {
				t.Fatalf("Release(%q) = %v", k2, err)
			}
		}
		if err := l1.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v", k1, err)
		}
		if n := store.Pending(); n != 0 {
			t.Fatalf("store keeps state for %d keys after both released", n)
		}
	})
}
