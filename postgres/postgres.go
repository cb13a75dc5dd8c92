package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// Scheme is the URL scheme this package registers; "postgresql" is
// registered as well, as libpq accepts both.
const Scheme = "postgres"

// ErrPoolExhausted is the cause, wrapped in locker.ErrUnavailable, of a
// TryAcquire that found the Locker's whole connection budget pinned by held
// or waiting locks. Acquire waits for a connection instead, within its
// context. Raise the budget with WithMaxConns (and the pool's MaxConns).
var ErrPoolExhausted = errors.New("postgres: every connection of the budget is pinned by a held or waiting lock")

func init() {
	locker.Register(Scheme, open)
	locker.Register("postgresql", open)
}

// New returns a Locker over pool, which the caller keeps owning: Close of the
// Locker releases the connections its locks pinned but does not close pool.
// Every held lock and every waiting Acquire pins one connection of pool, up
// to the Locker's connection budget (WithMaxConns; by default a quarter of
// the server's connections for ordinary roles, read at the first
// acquisition, and never more than pool's MaxConns). opts are this
// package's options and locker's (locker.WithTTL and the like).
//
// A pool the caller built keeps pgx's default context handling; a cancelled
// Acquire still leaves the server's lock queue by a cancel request of its
// own (docs/design/postgres.md, "Acquire, refresh, release").
func New(pool *pgxpool.Pool, opts ...locker.Option) (locker.Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: postgres: nil pool", locker.ErrInvalidOption)
	}
	bc := locker.SplitOptions(Scheme, opts)
	cfg, err := newConfig(bc.Settings)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	return newLocker(pool, false, cfg, bc, 0)
}

// newLocker is the constructor New and open share. budget is the
// connection budget if already known (0: read it from the server).
func newLocker(pool *pgxpool.Pool, own bool, cfg config, bc locker.BackendConfig, budget int) (locker.Locker, error) {
	b, err := newBackend(pool, own, cfg, bc.Logger, budget)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	var db driver.Backend = b
	if cfg.mode == Advisory {
		db = newAdvisory(b)
	}
	l, err := locker.New(db, bc.Options...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// open is the Opener of the postgres and postgresql schemes: the libpq URL,
// with pgx's pool parameters (pool_max_conns …) and this package's
// parameters, which are taken out before pgx parses the rest.
func open(ctx context.Context, u *url.URL, opts []locker.Option) (locker.Locker, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: query: %v", locker.ErrInvalidURL, err)
	}
	uopts, err := urlOptions(q)
	if err != nil {
		return nil, err
	}
	bc := locker.SplitOptions(Scheme, append(uopts, opts...))
	cfg, err := newConfig(bc.Settings)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(rest.String())
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("%w: %v", locker.ErrInvalidURL, err)
	}
	// Connect once, so that an unreachable server is reported at Open, and
	// read the connection budget before sizing the pool.
	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == codeUndefinedObject {
			// A query parameter nobody knows went to the server as a
			// run-time setting: "unrecognized configuration parameter".
			return nil, fmt.Errorf("%w: postgres: query parameter: %s", locker.ErrInvalidURL, pgErr.Message)
		}
		err = fmt.Errorf("postgres: connecting: %w", err)
		authz(&err)
		return nil, err
	}
	avail, err := availableConns(ctx, conn)
	if err == nil && cfg.skipDDL {
		// No migrations at run time: the schema must be there, and usable.
		var n names
		if n, err = newNames(cfg.schema, cfg.table); err == nil {
			err = checkObjects(ctx, conn, n)
		}
	}
	_ = conn.Close(context.Background())
	if err != nil {
		err = fmt.Errorf("postgres: %w", err)
		authz(&err)
		return nil, err
	}
	budget := cfg.maxConns
	if budget == 0 {
		budget = defaultBudget(avail)
	}
	if !q.Has("pool_max_conns") {
		// One more than the budget, for the statements that run beside
		// the pinned connections (backend.pinnable).
		pc.MaxConns = int32(budget + 1)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %v", locker.ErrInvalidURL, err)
	}
	l, err := newLocker(pool, true, cfg, bc, budget)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return l, nil
}

// availableConnsSQL counts the connections the server lets ordinary roles
// open (reserved_connections exists from PostgreSQL 16).
const availableConnsSQL = "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int" +
	" - coalesce(current_setting('reserved_connections', true)::int, 0)"

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func availableConns(ctx context.Context, q queryRower) (int, error) {
	var n int
	if err := q.QueryRow(ctx, availableConnsSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading max_connections: %w", err)
	}
	return n, nil
}

// defaultBudget is the default connection budget of a Locker on a server
// that lets ordinary roles open avail connections: a quarter of them, so
// that a Locker holding all the locks it can leaves room for the
// application's own pool and a few more Lockers.
func defaultBudget(avail int) int { return max(1, avail/4) }

// backend is the driver.Backend over one pool.
type backend struct {
	pool    *pgxpool.Pool
	ownPool bool
	skipDDL bool
	n       names
	schema  *onceCtx
	log     *slog.Logger

	// slots bounds the connections pinned by held and waiting locks, so that
	// TryAcquire can fail at once when there is none left instead of
	// waiting on the pool. It is made by sized, once the budget is known.
	slots    chan struct{}
	maxConns int // the budget asked for; 0 reads the server's
	sized    *onceCtx

	mu      sync.Mutex
	locks   map[*lock]struct{}  // held locks, released by Close
	watches map[*watch]struct{} // watches, ended by Close
	closed  bool
}

func newBackend(pool *pgxpool.Pool, own bool, cfg config, log *slog.Logger, budget int) (*backend, error) {
	n, err := newNames(cfg.schema, cfg.table)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &backend{
		pool:     pool,
		ownPool:  own,
		skipDDL:  cfg.skipDDL,
		n:        n,
		schema:   newOnceCtx(),
		log:      log,
		maxConns: cfg.maxConns,
		sized:    newOnceCtx(),
		locks:    map[*lock]struct{}{},
		watches:  map[*watch]struct{}{},
	}
	if budget > 0 {
		b.setBudget(budget)
	}
	return b, nil
}

// setBudget makes the slots of a budget of n connections; called once.
func (b *backend) setBudget(n int) {
	b.slots = make(chan struct{}, b.pinnable(n))
	b.sized.do(context.Background(), func() error { return nil })
}

// budget returns the slots, reading the server's max_connections the first
// time if no budget was given.
func (b *backend) budget(ctx context.Context) (chan struct{}, error) {
	err := b.sized.do(ctx, func() error {
		n := b.maxConns
		if n == 0 {
			avail, err := availableConns(ctx, b.pool)
			if err != nil {
				return err
			}
			n = defaultBudget(avail)
		}
		b.slots = make(chan struct{}, b.pinnable(n))
		return nil
	})
	return b.slots, err
}

// pinnable returns how many connections of a budget of n the Locker pins at
// most: all but one of the pool's, which is left for the statements that
// run beside the pinned ones (Inspect, List, Publish, the holder records
// and notifications of a grant) — unless the pool has only one.
func (b *backend) pinnable(n int) int {
	return min(n, max(1, int(b.pool.Config().MaxConns)-1))
}
func (b *backend) Name() string { return Scheme }

// RoundTTL implements driver.TTLRounder: idle_in_transaction_session_timeout
// counts whole milliseconds up to the largest int32.
func (b *backend) RoundTTL(ttl time.Duration) (time.Duration, error) {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxInt32 {
		return 0, fmt.Errorf("%w: postgres: TTL %v is longer than idle_in_transaction_session_timeout allows (%v)",
			locker.ErrInvalidOption, ttl, time.Duration(math.MaxInt32)*time.Millisecond)
	}
	return ms * time.Millisecond, nil
}

// millis formats ttl for set_config; RoundTTL has made it whole milliseconds.
func millis(ttl time.Duration) string {
	return fmt.Sprint(int64((ttl + time.Millisecond - 1) / time.Millisecond))
}

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer authz(&err)
	if err := b.trySlot(ctx); err != nil {
		return nil, err
	}
	return b.acquire(ctx, req, true)
}

// trySlot takes a connection of the budget, or fails at once with
// ErrPoolExhausted.
func (b *backend) trySlot(ctx context.Context) error {
	slots, err := b.budget(ctx)
	if err != nil {
		return err
	}
	select {
	case slots <- struct{}{}:
		return nil
	default:
		return fmt.Errorf("%w (max_conns=%d)", ErrPoolExhausted, cap(slots))
	}
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer authz(&err)
	slots, err := b.budget(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a connection of the budget (max_conns=%d): %w", cap(slots), ctx.Err())
	}
	return b.acquire(ctx, req, false)
}

func (b *backend) freeSlot() { <-b.slots }

func (b *backend) track(l *lock) {
	b.mu.Lock()
	b.locks[l] = struct{}{}
	b.mu.Unlock()
}

func (b *backend) untrack(l *lock) {
	b.mu.Lock()
	delete(b.locks, l)
	b.mu.Unlock()
}

// Close drops the connections of locks still held (the portable layer has
// released every lease it tracks; what remains are leases that were lost
// locally before the server noticed) and closes the pool if it is ours.
func (b *backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	held := make([]*lock, 0, len(b.locks))
	for l := range b.locks {
		held = append(held, l)
	}
	watches := make([]*watch, 0, len(b.watches))
	for w := range b.watches {
		watches = append(watches, w)
	}
	b.mu.Unlock()
	for _, l := range held {
		l.abandon()
	}
	for _, w := range watches {
		w.cancel()
		<-w.done
	}
	if b.ownPool {
		b.pool.Close()
	}
	return nil
}

// The optional abilities of package driver this backend has.
var (
	_ driver.TTLRounder = (*backend)(nil)
	_ driver.Inspector  = (*backend)(nil)
	_ driver.Publisher  = (*backend)(nil)
	_ driver.Watcher    = (*backend)(nil)
	_ driver.Permits    = (*backend)(nil)
	_ driver.MinHolds   = (*backend)(nil)
)

// Permits implements driver.Permits: permit rows (permits.go).
func (b *backend) Permits() {}

// MinHolds implements driver.MinHolds: held_until in holder records.
func (b *backend) MinHolds() {}
