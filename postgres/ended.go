package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// errConnEnded marks a statement that failed because the server had ended
// its connection: a restart, a failover, pg_terminate_backend or
// idle_session_timeout ends the pool's idle connections, and pgxpool pings
// only those idle for over a second before handing them out.
var errConnEnded = errors.New("postgres: the server had ended the connection")

// endedOr returns err, marked with errConnEnded if conn has closed.
func endedOr(conn *pgx.Conn, err error) error {
	if conn.IsClosed() && !errors.Is(err, errConnEnded) {
		return fmt.Errorf("%w: %w", errConnEnded, err)
	}
	return err
}

// onLiveConn runs an acquisition again while it fails on a connection the
// server had ended: such a connection held nothing, and its session's locks
// and transaction ended with it, so the caller is not told of it. Each
// failure destroys one connection of the pool, so the retries are bounded
// by its size; an outage fails at the pool's connect instead.
func onLiveConn[T any](ctx context.Context, b *backend, acquire func() (T, error)) (T, error) {
	for tries := int32(0); ; tries++ {
		v, err := acquire()
		if err == nil || !errors.Is(err, errConnEnded) || ctx.Err() != nil || tries >= b.pool.Config().MaxConns {
			return v, err
		}
	}
}
