package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/sqlfence"
)

// ErrTokenRange is returned by a Guard for a token above the largest bigint
// (2^63-1), which no PostgreSQL lock of this package hands out.
var ErrTokenRange = errors.New("postgres: guard: token does not fit a bigint")

// GuardOption is an option of NewGuard.
type GuardOption func(*guardConfig)

type guardConfig struct {
	schema, table string
	skipDDL       bool
}

// WithGuardSchema names the schema of the guard's table (default "public").
func WithGuardSchema(name string) GuardOption { return func(c *guardConfig) { c.schema = name } }

// WithGuardTable names the guard's table (default "locker_fences").
func WithGuardTable(name string) GuardOption { return func(c *guardConfig) { c.table = name } }

// WithGuardSkipSchemaCreation, when true, never runs the DDL of guard.sql:
// a migration made the table.
func WithGuardSkipSchemaCreation(skip bool) GuardOption {
	return func(c *guardConfig) { c.skipDDL = skip }
}

// Guard is a fencing.Guard kept in PostgreSQL: a table of the highest token
// admitted per resource. Write admits a token and runs the protected write
// in one transaction, so that the check, the new highest token and the
// write commit together or not at all; AdmitTx does the same inside a
// transaction the caller already has; Admit is the check alone.
//
// Admission is one statement, INSERT … ON CONFLICT DO UPDATE … WHERE
// stored <= new: a stale token updates zero rows and is refused with
// fencing.ErrStaleToken. The row lock the statement takes is held until the
// caller's transaction ends, so concurrent writers to one resource are
// serialized and one with a lower token, arriving meanwhile, is refused
// once the higher one commits.
type Guard struct {
	pool   *pgxpool.Pool
	table  string // quoted, qualified
	schema string
	ddl    string
	skip   bool
	once   *onceCtx
	upsert string
}

var _ fencing.Guard = (*Guard)(nil)

// NewGuard returns a Guard whose table lives in the database of pool (used
// by Admit and Write, and to create the table on first use). Bad names are
// refused with locker.ErrInvalidOption.
func NewGuard(pool *pgxpool.Pool, opts ...GuardOption) (*Guard, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: postgres: guard: nil pool", locker.ErrInvalidOption)
	}
	cfg := guardConfig{schema: DefaultSchema, table: DefaultFenceTable}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := checkName("schema", cfg.schema, maxIdentLen); err != nil {
		return nil, fmt.Errorf("%w: postgres: guard: %w", locker.ErrInvalidOption, err)
	}
	if err := checkName("table", cfg.table, maxIdentLen); err != nil {
		return nil, fmt.Errorf("%w: postgres: guard: %w", locker.ErrInvalidOption, err)
	}
	qs, qt := pgx.Identifier{cfg.schema}.Sanitize(), pgx.Identifier{cfg.table}.Sanitize()
	table := qs + "." + qt
	return &Guard{
		pool:   pool,
		table:  table,
		schema: cfg.schema,
		ddl:    strings.NewReplacer("{{schema}}", qs, "{{table}}", qt).Replace(guardSQL),
		skip:   cfg.skipDDL,
		once:   newOnceCtx(),
		upsert: "INSERT INTO " + table + " AS f (resource, token) VALUES ($1, $2) " +
			"ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token",
	}, nil
}

// Admit implements fencing.Guard in a statement of its own: it records token
// as the highest for resource unless a higher one was admitted before.
func (g *Guard) Admit(ctx context.Context, resource string, token uint64) error {
	if err := g.prepare(ctx, resource, token); err != nil {
		return err
	}
	tag, err := g.pool.Exec(ctx, g.upsert, resource, int64(token))
	return g.result(resource, token, tag, err)
}

// AdmitTx admits token for resource inside tx, the caller's transaction that
// performs the protected write. If it returns an error the write must not
// happen (roll tx back). The admission becomes visible to other writers only
// when tx commits.
func (g *Guard) AdmitTx(ctx context.Context, tx pgx.Tx, resource string, token uint64) error {
	if err := g.prepare(ctx, resource, token); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, g.upsert, resource, int64(token))
	return g.result(resource, token, tag, err)
}

// Write admits token for resource and runs fn in the same transaction on
// the guard's pool, committing both or neither: fencing.ErrStaleToken (and
// no call of fn) if a higher token was admitted before; fn's error, with
// the transaction rolled back, if fn fails.
func (g *Guard) Write(ctx context.Context, resource string, token uint64, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
		if err := g.AdmitTx(ctx, tx, resource, token); err != nil {
			return err
		}
		return fn(tx)
	})
}

func (g *Guard) prepare(ctx context.Context, resource string, token uint64) (err error) {
	defer authz(&err)
	if err := sqlfence.Check("postgres: guard", resource, token, ErrTokenRange); err != nil {
		return err
	}
	if g.skip {
		return nil
	}
	return g.once.do(ctx, func() error {
		conn, err := g.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("postgres: guard: %w", err)
		}
		defer conn.Release()
		if err := createObjects(ctx, conn.Conn(), g.schema, g.ddl, nil, g.table); err != nil {
			return fmt.Errorf("postgres: guard: %w", err)
		}
		return nil
	})
}

func (g *Guard) result(resource string, token uint64, tag pgconn.CommandTag, err error) error {
	if err != nil {
		err = fmt.Errorf("postgres: guard: admit %q: %w", resource, err)
		authz(&err)
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: resource %q: token %d is below the highest admitted", fencing.ErrStaleToken, resource, token)
	}
	return nil
}
