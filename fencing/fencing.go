// Package fencing is the resource side of fencing tokens: guards that refuse
// an operation carrying a token lower than one already admitted.
//
// A lock alone cannot protect a resource from a holder whose lease ran out
// while it was paused (a GC pause, a stalled VM, a partition): by the time it
// writes, another holder may have the lock. Each lease carries a token that
// strictly increases per key; the resource remembers the highest token it has
// admitted and refuses anything lower. The guard must sit where the write
// happens — in the same process as the in-memory Memory guard here, in the
// store itself for the Redis, etcd, ZooKeeper and PostgreSQL guards that live
// with those backends, or in any PostgreSQL or SQLite database through
// database/sql (package fencing/sqlguard) — so that the check and the write
// are one atomic step: every guard's Write admits a token and applies a write
// together.
//
// Permits (locker.WithLimit) hold n leases of one key at once, so a guard that
// keeps the highest token fits only a lock (n = 1): with permits it would
// refuse every holder but the newest, and admit a lost permit whose token is
// the highest. No token alone tells a live permit from a lost one. A permit
// guard asks the lock service instead: its Write(ctx, key, token, write)
// applies the write only if the permit of key granted that token is still
// held, checked in the same atomic step (memory, Redis, etcd and ZooKeeper:
// NewPermitGuard in each; a refusal wraps ErrStaleToken). PostgreSQL has
// none: another transaction cannot hold a permit in place while it writes.
// See docs/design/permit-fencing.md.
package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStaleToken is returned when an operation's token is lower than the
// highest token already admitted for the resource.
var ErrStaleToken = errors.New("fencing: stale token")

// Guard admits operations on resources in fencing-token order.
type Guard interface {
	// Admit lets an operation on resource proceed only if token is >= the
	// highest token admitted for resource so far; otherwise it returns
	// ErrStaleToken.
	Admit(ctx context.Context, resource string, token uint64) error
}

// Memory is an in-process Guard, safe for concurrent use. The zero value is
// ready to use.
type Memory struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// NewMemory returns an empty in-process guard.
func NewMemory() *Memory { return &Memory{} }

// Admit implements Guard.
func (m *Memory) Admit(ctx context.Context, resource string, token uint64) error {
	return m.Write(ctx, resource, token, nil)
}

// Write admits token for resource and, if admitted, runs fn while still
// holding the guard, so that no operation with a lower token can slip in
// between the check and the write. It is the atomic admit-and-write every
// guard offers under this name. A token of 0 is never issued by a lock and
// is refused.
func (m *Memory) Write(ctx context.Context, resource string, token uint64, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.highest == nil {
		m.highest = map[string]uint64{}
	}
	if h := m.highest[resource]; token == 0 || token < h {
		return fmt.Errorf("%w: resource %q: token %d, already admitted %d", ErrStaleToken, resource, token, h)
	}
	m.highest[resource] = token
	if fn != nil {
		return fn()
	}
	return nil
}

// Highest returns the highest token admitted for resource (0 if none).
func (m *Memory) Highest(resource string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.highest[resource]
}
