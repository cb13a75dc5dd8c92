package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/bounds"
)

// warmUpBound bounds WarmUp: a server that has just started on a loaded
// machine (a CI run's ZooKeeper took 37 s to start, 2026-12-04) answers its
// first clients slowly for a while, a JVM most of all.
const warmUpBound = 2 * time.Minute

// WarmUp makes a client and takes and releases a key of its own, trying
// both again until they succeed, before the deployment's first run: a run
// checks liveness within a bound that is about the service, not about a
// server still starting. That CI run's first ZooKeeper history, begun as the
// server came up, saw 8 of its 12 operations time out and its liveness step
// take 12 s of 10.
func (d *Deployment) WarmUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), warmUpBound)
	defer cancel()
	start := time.Now()
	for {
		l, err := d.NewLocker(ctx)
		if err == nil {
			err = conformance.WarmUp(ctx, l)
			_ = l.Close()
		}
		if err == nil {
			bounds.Took(t, d.Name+": warm-up", time.Since(start), warmUpBound)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: not ready within %v of its start: %v", d.Name, warmUpBound, err)
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}
