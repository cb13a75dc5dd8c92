// Package guardtest checks the promise every fencing.Guard makes, on a
// guard with no admission yet: tokens are admitted in non-decreasing order
// per resource, a lower one is refused with fencing.ErrStaleToken, token 0
// is refused, and resources are independent whatever their names.
package guardtest

import (
	"context"
	"errors"
	"testing"

	"github.com/distlock/locker/fencing"
)

// AdmitOrder runs the check on g, which must have admitted nothing yet.
func AdmitOrder(ctx context.Context, t testing.TB, g fencing.Guard) {
	t.Helper()
	for _, step := range []struct {
		resource string
		token    uint64
		stale    bool
	}{
		{"r", 5, false}, {"r", 5, false}, {"r", 7, false}, {"r", 6, true}, {"other", 1, false},
		{"r", 7, false}, {`r'; DROP TABLE locker_fences; --`, 1, false}, {`r"`, 1, false},
		{"r/", 1, false}, {"r", 1, true}, {"r", 0, true}, {"new", 0, true},
	} {
		err := g.Admit(ctx, step.resource, step.token)
		if step.stale != errors.Is(err, fencing.ErrStaleToken) || (!step.stale && err != nil) {
			t.Fatalf("Admit(%q, %d) = %v, stale %v", step.resource, step.token, err, step.stale)
		}
	}
}
