package election

import (
	"context"
	"fmt"
	"sync"

	"github.com/distlock/locker"
)

// Term is one candidate's leadership, from the Campaign that won it until
// it is resigned or lost. It refreshes itself in the background; Done is
// closed the moment it ends. All methods are safe for concurrent use.
type Term struct {
	e     *Election
	lease locker.Lease

	proclaiming sync.Mutex // one Proclaim at a time, so value is what was published last
	mu          sync.Mutex
	value       string
}

// Token is the term's fencing token: > 0 and strictly larger than the token
// of every earlier term of the election. Send it with every write the
// leader makes, and let the resource refuse tokens lower than one it has
// seen (package fencing): only that keeps a leader that was paused past its
// TTL from writing after its successor.
func (t *Term) Token() uint64 { return t.lease.Token() }

// Value is the value the term was won with or last proclaimed.
func (t *Term) Value() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// Done is closed when the term ends: resigned, or lost (its lease could not
// be refreshed, the backend reported it gone, or the Locker was closed).
func (t *Term) Done() <-chan struct{} { return t.lease.Done() }

// Err is nil while the term lasts; then locker.ErrReleased after Resign, or
// locker.ErrLeaseLost wrapping why the lead was lost.
func (t *Term) Err() error { return t.lease.Err() }

// Proclaim publishes a new value without giving up the lead; observers see
// it. It returns locker.ErrLeaseLost (and publishes nothing) if the term has
// ended, and locker.ErrUnsupported on a backend that cannot publish.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	t.proclaiming.Lock()
	defer t.proclaiming.Unlock()
	if err := locker.Publish(ctx, t.lease, value); err != nil {
		return fmt.Errorf("election %q: proclaim: %w", t.e.name, err)
	}
	t.mu.Lock()
	t.value = value
	t.mu.Unlock()
	return nil
}

// Resign gives the lead up: the next candidate leads as soon as the
// backend hands the lock over. Resigning twice is a no-op; resigning a term
// that was lost returns locker.ErrLeaseLost.
func (t *Term) Resign(ctx context.Context) error {
	if err := t.lease.Release(ctx); err != nil {
		return fmt.Errorf("election %q: resign: %w", t.e.name, err)
	}
	return nil
}
