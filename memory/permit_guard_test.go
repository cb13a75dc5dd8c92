package memory_test

import (
	"context"
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/guardtest"
	"github.com/distlock/locker/memory"
)

func newPermitHarness() (*harness, *memory.PermitGuard) {
	store := memory.NewStore()
	return &harness{store: store, kill: map[locker.Locker]func(){}}, memory.NewPermitGuard(store)
}

func TestPermitGuard_AdmitsLivePermits_RefusesReleasedAndLost(t *testing.T) {
	h, g := newPermitHarness()
	guardtest.Permits(t, h, "job", func(ctx context.Context, key string, token uint64) error {
		return g.Write(ctx, key, token, nil)
	})
}

func TestPermitGuard_PlainLock_AsTodaysGuard(t *testing.T) {
	h, g := newPermitHarness()
	today := fencing.NewMemory()
	guardtest.PlainLock(t, h, "job",
		func(ctx context.Context, key string, token uint64) error { return g.Write(ctx, key, token, nil) },
		func(ctx context.Context, key string, token uint64) error { return today.Admit(ctx, key, token) })
}

func TestPermitGuard_WriteSkipsFnWhenNotHeld(t *testing.T) {
	_, g := newPermitHarness()
	ran := false
	err := g.Write(context.Background(), "job", 1, func() error { ran = true; return nil })
	if err == nil || ran {
		t.Fatalf("Write for a key never held = %v (fn ran: %v), want ErrStaleToken", err, ran)
	}
}
