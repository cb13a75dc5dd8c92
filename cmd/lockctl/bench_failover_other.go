//go:build !unix

package main

import (
	"context"
	"time"
)

func (a *app) benchFailover(context.Context, []benchBackend, int, time.Duration) int {
	return a.failf(exitUsage, "bench: --failover needs process groups (unix)")
}
