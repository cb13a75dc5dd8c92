package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/memory"
)

// A panic in fn that someone up the stack recovers (net/http does) must not
// leave the lock held: Do releases on the way out, and stops refreshing.
func TestDo_PanicReleasesLock(t *testing.T) {
	ctx := context.Background()
	store := memory.NewStore()
	a, err := memory.New(store, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := memory.New(store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic of fn", r)
			}
		}()
		_ = locker.Do(ctx, a, "job", func(context.Context, locker.Lease) error { panic("boom") })
	}()

	lease, err := b.TryAcquire(ctx, "job")
	if errors.Is(err, locker.ErrLocked) {
		t.Fatal("lock still held after fn panicked and the panic was recovered")
	}
	if err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
}
