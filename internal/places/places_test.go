package places

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// queued waits until n Acquires wait for a place of lock.
func queued(s *Set, lock string, n int) {
	for {
		s.mu.Lock()
		q := s.queues[lock]
		got := q != nil && len(q.next) == n
		s.mu.Unlock()
		if got {
			return
		}
		// Yield until the goroutine started last has queued.
		runtime.Gosched()
	}
}

func TestEnter_BoundedPerLock_FurtherWaitInArrivalOrder(t *testing.T) {
	s := New(2)
	ctx := context.Background()
	var leaves []func()
	for range 2 {
		leave, err := s.Enter(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	// Another lock's places are its own.
	other, err := s.Enter(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	// Full: an Enter whose context has ended gets no place.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Enter(done, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Enter with both places taken and its context ended = %v, want Canceled", err)
	}
	// Three more queue one after the other; each place given back goes to
	// the oldest.
	entered := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leave, err := s.Enter(ctx, "a")
			if err != nil {
				t.Error(err)
				return
			}
			entered <- i
			leave()
		}()
		queued(s, "a", i+1)
	}
	leaves[0]()
	leaves[0]() // a second call gives nothing back
	for want := range 3 {
		if got := <-entered; got != want {
			t.Fatalf("place %d went to Acquire %d, want %d (arrival order)", want, got, want)
		}
	}
	wg.Wait()
	leaves[1]()
	other()
	if n := len(s.queues); n != 0 {
		t.Fatalf("%d locks kept after every place was given back, want none", n)
	}
}

func TestEnter_CancelledWaiterLeavesTheQueue(t *testing.T) {
	s := New(1)
	ctx := context.Background()
	leave, err := s.Enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := s.Enter(wctx, "a")
		got <- err
	}()
	queued(s, "a", 1)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Enter = %v, want Canceled", err)
	}
	leave()
	// The place is free again, not handed to the one that gave up.
	again, err := s.Enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if n := len(s.queues); n != 0 {
		t.Fatalf("%d locks kept after every place was given back, want none", n)
	}
}

func TestNew_AtLeastOnePlace(t *testing.T) {
	s := New(0)
	leave, err := s.Enter(context.Background(), "a")
	if err != nil {
		t.Fatalf("Enter on New(0) = %v, want a place (at least one)", err)
	}
	leave()
}
