// Command swap is one program written against locker, run unchanged on
// every backend: the URL alone chooses the backend, and the program prints
// the same lines whichever it is.
//
//	go run ./examples/swap memory://
//	go run ./examples/swap redis://127.0.0.1:6379/0
//	go run ./examples/swap etcd://127.0.0.1:2379/locks
//
// Its test runs it on memory, Redis, Redlock, etcd, ZooKeeper and
// PostgreSQL and compares the output with the one README.md shows.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/distlock/locker"
	_ "github.com/distlock/locker/etcd"
	"github.com/distlock/locker/fencing"
	_ "github.com/distlock/locker/memory"
	_ "github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
)

func main() {
	url := "memory://"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, url, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "swap:", err)
		os.Exit(1)
	}
}

// run plays two clients of one lock service, a and b, through the promises
// every backend keeps.
func run(ctx context.Context, url string, out io.Writer) error {
	a, err := locker.Open(ctx, url, locker.WithOwner("a"))
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := locker.Open(ctx, url, locker.WithOwner("b"))
	if err != nil {
		return err
	}
	defer b.Close()
	// A key of this run's own: a lock service remembers a key's tokens.
	key := fmt.Sprintf("examples/swap/%d", time.Now().UnixNano())

	first, err := a.TryAcquire(ctx, key, locker.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "a holds the lock, token > 0:", first.Token() > 0)
	fmt.Fprintln(out, "granted TTL at least 10s:", locker.GrantedTTL(first) >= 10*time.Second)

	_, err = b.TryAcquire(ctx, key)
	fmt.Fprintln(out, "b tries, ErrLocked:", errors.Is(err, locker.ErrLocked))

	wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Acquire(wait, key)
	cancel()
	fmt.Fprintln(out, "b waits 300ms, deadline exceeded:", errors.Is(err, context.DeadlineExceeded))

	released := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		released <- first.Release(ctx)
	}()
	second, err := b.Acquire(ctx, key)
	if err != nil {
		return err
	}
	if err := <-released; err != nil {
		return err
	}
	fmt.Fprintln(out, "a releases, b gets it with a larger token:", second.Token() > first.Token())

	// The resource keeps the highest token it has seen, and checks and
	// writes in one step: a's late write, with its old token, is refused.
	resource := fencing.NewMemory()
	write := func(token uint64) error {
		return resource.Write(ctx, key, token, func() error { return nil })
	}
	fmt.Fprintln(out, "b writes with its token, admitted:", write(second.Token()) == nil)
	fmt.Fprintln(out, "a writes late with its old token, refused:", errors.Is(write(first.Token()), fencing.ErrStaleToken))

	if err := second.Release(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "b releases, Err:", second.Err())
	return nil
}
