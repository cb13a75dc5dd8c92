package fencing_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/guardtest"
)

func TestMemory_RefusesLowerToken(t *testing.T) {
	g := fencing.NewMemory()
	guardtest.AdmitOrder(context.Background(), t, g)
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
