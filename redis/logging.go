package redis

import (
	"context"
	"fmt"
	"log/slog"
)

// A GoRedisLogging is what goredis.SetLogger takes.
type GoRedisLogging interface {
	Printf(ctx context.Context, format string, v ...any)
}

// GoRedisLogger adapts l to go-redis's own logger, for goredis.SetLogger.
// go-redis logs through one logger per process (failed dials, pool and
// pub/sub events), to stderr by default, whatever a Locker's
// locker.WithLogger says: a program that wants those lines elsewhere calls
// goredis.SetLogger(redis.GoRedisLogger(logger)) once at start-up. They go
// to l at level Warn; a nil l discards them.
func GoRedisLogger(l *slog.Logger) GoRedisLogging {
	if l == nil {
		l = discardLogger
	}
	return goRedisLog{l}
}

type goRedisLog struct{ l *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	if g.l.Enabled(ctx, slog.LevelWarn) {
		g.l.WarnContext(ctx, fmt.Sprintf(format, v...), "source", "go-redis")
	}
}
