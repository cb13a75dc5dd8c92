package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/distlock/locker/fencing"
)

// PermitGuard admits a write only from a permit (or lock) that its Store
// still counts as held: the check and the write happen under the Store's
// lock, so the permit cannot end between them. It fits N-permit locks,
// which a fence keeping the highest token does not (see package fencing).
type PermitGuard struct{ store *Store }

// NewPermitGuard returns a PermitGuard over store (nil: the process-wide
// default Store, as for New).
func NewPermitGuard(store *Store) *PermitGuard {
	if store == nil {
		store = Named("")
	}
	return &PermitGuard{store: store}
}

// Write runs fn if the permit of key granted with token is held now, and
// holds the Store until fn returns: fn must not call a Locker of the
// Store. key is the stored key: with a namespace ns, ns + "\x00" + key. A
// permit that was released (even one kept to the end of its minimum
// hold), lost or never granted is refused with an error wrapping
// fencing.ErrStaleToken, and fn does not run.
func (g *PermitGuard) Write(ctx context.Context, key string, token uint64, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil || token == 0 || !slices.ContainsFunc(ks.holders, func(h *holding) bool { return h.token == token && !h.released }) {
		return fmt.Errorf("%w: key %q: permit %d is not held", fencing.ErrStaleToken, key, token)
	}
	if fn != nil {
		return fn()
	}
	return nil
}
