package locker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	_ "github.com/distlock/locker/memory" // registers memory://
)

// Open a Locker from configuration: the same code runs on memory:// in
// development and on etcd:// or redis:// in production.
func ExampleOpen() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-open?ttl=30s")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lease, err := l.TryAcquire(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	fmt.Println("token > 0:", lease.Token() > 0)

	_, err = l.TryAcquire(ctx, "reports/daily")
	fmt.Println("second try is locked:", errors.Is(err, locker.ErrLocked))
	// Output:
	// token > 0: true
	// second try is locked: true
}

// Acquire waits until the lock is free or the context ends.
func ExampleLocker_acquire() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-acquire")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	first, _ := l.Acquire(ctx, "job")
	go func() {
		time.Sleep(10 * time.Millisecond)
		first.Release(ctx)
	}()

	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := l.Acquire(ctx2, "job", locker.WithTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("later holder has a larger token:", second.Token() > first.Token())
	// Output: later holder has a larger token: true
}

// Do holds the lock while a function runs, refreshing it in the background,
// and cancels the function's context if the lock is lost.
func ExampleDo() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-do")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	err = locker.Do(ctx, l, "migrations", func(ctx context.Context, lease locker.Lease) error {
		// ctx is cancelled if the lease is lost; check it between steps.
		fmt.Println("migrating with token", lease.Token())
		return ctx.Err()
	}, locker.WithTTL(10*time.Second))
	fmt.Println("err:", err)
	// Output:
	// migrating with token 1
	// err: <nil>
}

// A fencing guard at the resource refuses a write from a holder whose lease
// ran out while it was paused, after a newer holder has written. The guard
// checks the token and applies the write in one step (Write): an Admit
// followed by a separate write would let the newer holder's write land in
// between and be overwritten.
func ExampleLease_Token_fencing() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-fencing")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	// In production the guard lives with the resource: sqlguard in its
	// database, or the Redis, etcd, ZooKeeper or PostgreSQL guard.
	guard := fencing.NewMemory()
	balance := 100
	withdraw := func(lease locker.Lease, amount int) error {
		return guard.Write(ctx, "account/42", lease.Token(), func() error {
			balance -= amount // runs only if the token is admitted
			return nil
		})
	}

	old, _ := l.Acquire(ctx, "account/42", locker.WithTTL(50*time.Millisecond), locker.WithAutoRefresh(false))
	<-old.Done() // the holder "pauses" past its TTL; the lease ends

	cur, _ := l.Acquire(ctx, "account/42")
	defer cur.Release(ctx)
	fmt.Println("current holder withdraws:", withdraw(cur, 30))

	err = withdraw(old, 30) // the paused holder wakes up
	fmt.Println("stale write refused:", errors.Is(err, fencing.ErrStaleToken))
	fmt.Println("balance:", balance)
	// Output:
	// current holder withdraws: <nil>
	// stale write refused: true
	// balance: 70
}
