package testenv

import (
	"context"
	"time"
)

// poll calls f until it succeeds or d has passed, and returns its last error.
func poll(d time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := f(ctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
