package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/memory"
)

// A permit guard admits the writes of every permit still held, and refuses
// a released one, whatever the order of their tokens.
func ExamplePermitGuard() {
	ctx := context.Background()
	store := memory.NewStore()
	l, _ := memory.New(store)
	defer l.Close()
	guard := memory.NewPermitGuard(store)

	a, _ := l.TryAcquire(ctx, "api", locker.WithLimit(2))
	b, _ := l.TryAcquire(ctx, "api", locker.WithLimit(2))
	calls := 0
	call := func() error { calls++; return nil }
	fmt.Println(guard.Write(ctx, "api", b.Token(), call))
	fmt.Println(guard.Write(ctx, "api", a.Token(), call)) // older, still held
	_ = a.Release(ctx)
	err := guard.Write(ctx, "api", a.Token(), call)
	fmt.Println(errors.Is(err, fencing.ErrStaleToken), calls)
	// Output:
	// <nil>
	// <nil>
	// true 2
}
