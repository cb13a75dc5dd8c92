//go:build !unix

package main

import (
	"context"
	"time"
)

func (a *app) benchFailover(context.Context, []string, int, time.Duration) int {
	return a.failf(exitUsage, "bench: --failover needs process groups (unix)")
}
