package fencing_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/distlock/locker/fencing"
)

func TestMemory_RefusesLowerToken(t *testing.T) {
	ctx := context.Background()
	g := fencing.NewMemory()
	for _, tok := range []uint64{3, 3, 7} {
		if err := g.Admit(ctx, "r", tok); err != nil {
			t.Fatalf("Admit(%d) = %v, want nil", tok, err)
		}
	}
	if err := g.Admit(ctx, "r", 6); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(6) after 7 = %v, want ErrStaleToken", err)
	}
	if err := g.Admit(ctx, "other", 1); err != nil {
		t.Fatalf("Admit on another resource = %v, want nil (resources are independent)", err)
	}
	if err := g.Admit(ctx, "r", 0); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Admit(0) = %v, want ErrStaleToken", err)
	}
	if h := g.Highest("r"); h != 7 {
		t.Fatalf("Highest = %d, want 7", h)
	}
}

func TestMemory_WriteSkipsFnWhenStale(t *testing.T) {
	ctx := context.Background()
	var g fencing.Memory
	wrote := 0
	write := func() error { wrote++; return nil }
	if err := g.Write(ctx, "r", 5, write); err != nil {
		t.Fatal(err)
	}
	if err := g.Write(ctx, "r", 4, write); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Write(4) = %v, want ErrStaleToken", err)
	}
	if wrote != 1 {
		t.Fatalf("write ran %d times, want 1", wrote)
	}
}

func TestMemory_ConcurrentAdmitsKeepHighest(t *testing.T) {
	ctx := context.Background()
	g := fencing.NewMemory()
	var wg sync.WaitGroup
	for i := uint64(1); i <= 100; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Admit(ctx, "r", i) }()
	}
	wg.Wait()
	if h := g.Highest("r"); h != 100 {
		t.Fatalf("Highest = %d, want 100", h)
	}
}

func TestMemory_CancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fencing.NewMemory().Admit(ctx, "r", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Admit = %v, want context.Canceled", err)
	}
}
