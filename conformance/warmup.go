package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/locker"
)

// WarmUp takes and releases a key of its own on l, so that a harness's
// NewLocker can hand the suite a client that is connected and ready, like a
// long-lived one: the FIFO tests define arrival order as call order, which a
// cold client's first round trips can upset. An attempt the backend answers
// with ErrUnavailable is tried again until ctx ends: the warm-up is not what
// the suite checks, and on a loaded CI machine (2026-12-04) a fresh etcd
// client's first lease grant outlasted the request timeout.
func WarmUp(ctx context.Context, l locker.Locker) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	key := "harness-warm-up/" + hex.EncodeToString(b[:])
	for {
		lease, err := l.TryAcquire(ctx, key)
		if err == nil {
			return lease.Release(ctx)
		}
		if !errors.Is(err, locker.ErrUnavailable) || ctx.Err() != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("warm-up: %w (last attempt: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
