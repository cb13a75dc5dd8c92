package floor

import (
	"context"

	"github.com/distlock/locker/benchkit"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the floor of a PostgreSQL server: SELECT 1 twice on one
// connection taken from a pool, as a lock pins one.
func Postgres(ctx context.Context, dsn string) (*benchkit.Subject, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = max(pc.MaxConns, 72)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return &benchkit.Subject{Name: "floor 2×SELECT 1", Group: "postgres", Role: benchkit.RoleFloor,
		Floor: "2 × SELECT 1 on one pinned connection (acquire is one pipelined batch, release one ROLLBACK)",
		Mutex: pgSelect{pool}, Close: func() error { pool.Close(); return nil }}, nil
}

type pgSelect struct{ pool *pgxpool.Pool }

func (p pgSelect) Lock(ctx context.Context, _ string) (benchkit.Release, error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
		c.Release()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer c.Release()
		_, err := c.Exec(ctx, "SELECT 1")
		return err
	}, nil
}
