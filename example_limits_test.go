package locker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/distlock/locker"
)

// A worker pool capped fleet-wide: however many workers run on however many
// machines, at most five call the fragile API at once. Each call holds one
// of the key's five permits (a semaphore); a worker waits for a free one.
func ExampleWithLimit() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-limit") // redis://, etcd://… in production
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	var mu sync.Mutex
	inFlight, most := 0, 0
	callFragileAPI := func() {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}

	var wg sync.WaitGroup
	for range 20 { // twenty workers, on one machine here
		wg.Go(func() {
			err := locker.Do(ctx, l, "fragile-api", func(context.Context, locker.Lease) error {
				callFragileAPI()
				return nil
			}, locker.WithLimit(5))
			if err != nil {
				log.Print(err)
			}
		})
	}
	wg.Wait()
	fmt.Println("at most 5 calls at once:", most <= 5)
	// Output: at most 5 calls at once: true
}

// A job that cron starts every minute on each of ten replicas runs once a
// minute: the first replica to ask takes the lock and keeps it on the
// server for 55 s after the grant, however fast the job ends; the others
// find it held and skip that minute.
func ExampleWithMinHold() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://example-min-hold")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	runs := 0
	everyMinute := func() { // what cron runs on each replica
		lease, err := l.TryAcquire(ctx, "jobs/cleanup", locker.WithMinHold(55*time.Second))
		if errors.Is(err, locker.ErrLocked) {
			return // another replica ran it this minute
		}
		if err != nil {
			log.Print(err)
			return
		}
		runs++ // the job itself, done in a second
		_ = lease.Release(ctx)
	}
	for range 10 { // ten replicas, started by cron in the same minute
		everyMinute()
	}
	fmt.Println("runs this minute:", runs)
	// Output: runs this minute: 1
}
