package sqlguard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/sqlfence"
)

// DefaultTable is the fence table's name unless WithTable says otherwise;
// it is also the postgres backend Guard's, whose table has the same columns.
const DefaultTable = "locker_fences"

// ErrTokenRange is returned for a token above 2^63-1, which the fence
// table's 64-bit signed column cannot hold and no lock of this module hands
// out.
var ErrTokenRange = errors.New("sqlguard: token does not fit a signed 64-bit integer")

// Option configures a Guard.
type Option func(*options)

type options struct {
	dialect       Dialect
	schema, table string
	noCreate      bool
}

// WithDialect sets the SQL dialect instead of detecting it from db's driver
// (needed when the driver is wrapped, by tracing for instance).
func WithDialect(d Dialect) Option { return func(o *options) { o.dialect = d } }

// WithTable names the fence table (default DefaultTable). The name is quoted
// as an identifier: any characters, at most 63 bytes.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

// WithSchema qualifies the fence table with a schema (PostgreSQL) or an
// attached database (SQLite); by default the name is unqualified.
func WithSchema(name string) Option { return func(o *options) { o.schema = name } }

// WithCreateTable(false) never creates the fence table: it must exist (see
// the package doc for its columns) and the role needs no CREATE privilege.
func WithCreateTable(create bool) Option { return func(o *options) { o.noCreate = !create } }

// Guard is a fencing.Guard kept in an SQL database: a table of the highest
// token admitted per resource. It is safe for concurrent use.
type Guard struct {
	db      *sql.DB
	stmts   statements
	create  bool
	created atomic.Bool
	// createInTx: AdmitTx creates the table inside the caller's
	// transaction (SQLite: in-process, so a no-op once the table exists is
	// nearly free, and pools of one connection are common).
	createInTx bool
}

var _ fencing.Guard = (*Guard)(nil)

// New returns a Guard over db, which the caller keeps owning. Bad options
// are refused with an error wrapping locker.ErrInvalidOption. New does not
// reach the database; the table is created on first use.
func New(db *sql.DB, opts ...Option) (*Guard, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlguard: nil *sql.DB", locker.ErrInvalidOption)
	}
	o := options{table: DefaultTable}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch o.dialect {
	case 0:
		d, ok := detect(db.Driver())
		if !ok {
			return nil, fmt.Errorf("%w: sqlguard: cannot tell the SQL dialect of driver %T: use WithDialect", locker.ErrInvalidOption, db.Driver())
		}
		o.dialect = d
	case PostgreSQL, SQLite:
	default:
		return nil, fmt.Errorf("%w: sqlguard: unknown %v", locker.ErrInvalidOption, o.dialect)
	}
	table, err := quoteIdent("table", o.table)
	if err != nil {
		return nil, fmt.Errorf("%w: sqlguard: %w", locker.ErrInvalidOption, err)
	}
	if o.schema != "" {
		schema, err := quoteIdent("schema", o.schema)
		if err != nil {
			return nil, fmt.Errorf("%w: sqlguard: %w", locker.ErrInvalidOption, err)
		}
		table = schema + "." + table
	}
	return &Guard{db: db, stmts: o.dialect.statements(table), create: !o.noCreate, createInTx: o.dialect == SQLite}, nil
}

// Admit implements fencing.Guard: it records token as the highest for
// resource, in a statement (a transaction) of its own, unless a higher one
// was admitted before, and then returns an error wrapping
// fencing.ErrStaleToken. A write made after Admit returns is not protected
// by it: use Write or AdmitTx.
func (g *Guard) Admit(ctx context.Context, resource string, token uint64) error {
	if err := g.prepare(ctx, resource, token); err != nil {
		return err
	}
	return g.admit(ctx, g.db, resource, token)
}

// Write admits token for resource and runs fn in the same transaction, then
// commits: the write is applied only with an admitted token, and concurrent
// writers of one resource are serialized by the fence row's lock. A stale
// token returns an error wrapping fencing.ErrStaleToken without calling fn;
// an error from fn is returned as is; either rolls the transaction back.
// fn must not commit or roll back tx.
func (g *Guard) Write(ctx context.Context, resource string, token uint64, fn func(*sql.Tx) error) error {
	if err := g.prepare(ctx, resource, token); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlguard: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it only says ErrTxDone
	if err := g.admit(ctx, tx, resource, token); err != nil {
		return err
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlguard: commit %q: %w", resource, err)
	}
	return nil
}

// AdmitTx admits token for resource inside tx, the caller's transaction that
// performs the protected write. Call it before the transaction reads what it
// will write. If it returns an error, the write must not happen: roll tx
// back. The admission counts only if tx commits.
func (g *Guard) AdmitTx(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	if tx == nil {
		return fmt.Errorf("%w: sqlguard: nil *sql.Tx", locker.ErrInvalidOption)
	}
	if err := sqlfence.Check("sqlguard", resource, token, ErrTokenRange); err != nil {
		return err
	}
	if g.createInTx && g.create && !g.created.Load() {
		return g.admitCreatingInTx(ctx, tx, resource, token)
	}
	if err := g.createTable(ctx); err != nil {
		return err
	}
	return g.admit(ctx, tx, resource, token)
}

// admitCreatingInTx is SQLite's first AdmitTx: the pool may have no other
// connection to create the table on (SetMaxOpenConns(1) is common), so it
// is created in tx, but only after the admission failed: any statement
// before the admission would make tx a reader, and SQLite answers a reader
// that then writes beside another writer with SQLITE_BUSY at once instead
// of waiting. An SQLite statement that fails leaves its transaction usable.
func (g *Guard) admitCreatingInTx(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	err := g.admit(ctx, tx, resource, token)
	if err == nil || errors.Is(err, fencing.ErrStaleToken) {
		g.created.Store(true)
		return err
	}
	if _, cerr := tx.ExecContext(ctx, g.stmts.create); cerr != nil {
		return err
	}
	// Not marked as created: the caller may roll tx back.
	return g.admit(ctx, tx, resource, token)
}

// prepare refuses what no admission may carry and creates the table once.
func (g *Guard) prepare(ctx context.Context, resource string, token uint64) error {
	if err := sqlfence.Check("sqlguard", resource, token, ErrTokenRange); err != nil {
		return err
	}
	return g.createTable(ctx)
}

// createTable creates the table once, unless told not to.
func (g *Guard) createTable(ctx context.Context) error {
	if !g.create || g.created.Load() {
		return nil
	}
	// On a connection of its own, outside any caller's transaction.
	_, err := g.db.ExecContext(ctx, g.stmts.create)
	if err != nil && ctx.Err() == nil {
		// Two PostgreSQL sessions creating the table at once: the second
		// fails on a catalog index when the first commits; now it exists.
		_, err = g.db.ExecContext(ctx, g.stmts.create)
	}
	if err != nil {
		return fmt.Errorf("sqlguard: create fence table: %w", err)
	}
	g.created.Store(true)
	return nil
}

// execQuerier is what *sql.DB and *sql.Tx share.
type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (g *Guard) admit(ctx context.Context, q execQuerier, resource string, token uint64) error {
	res, err := q.ExecContext(ctx, g.stmts.upsert, resource, int64(token))
	if err != nil {
		return fmt.Errorf("sqlguard: admit %q: %w", resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlguard: admit %q: %w", resource, err)
	}
	if n > 0 {
		return nil
	}
	// Only for the message: the row cannot fall below what refused token.
	var highest int64
	if q.QueryRowContext(ctx, g.stmts.highest, resource).Scan(&highest) != nil {
		return fmt.Errorf("%w: resource %q: token %d is below the highest admitted", fencing.ErrStaleToken, resource, token)
	}
	return fmt.Errorf("%w: resource %q: token %d, already admitted %d", fencing.ErrStaleToken, resource, token, highest)
}
