package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// Scheme is the URL scheme this package registers; "postgresql" is
// registered as well, as libpq accepts both.
const Scheme = "postgres"

// DefaultMaxConns is the pool size of a Locker opened from a URL without a
// pool_max_conns parameter. Every held lock and every waiting Acquire pins
// one connection, so the pool size is the number of locks one Locker can hold
// or wait for at once; pgxpool's own default (the number of CPUs, at least 4)
// is too small for that.
const DefaultMaxConns = 16

// ErrPoolExhausted is the cause, wrapped in locker.ErrUnavailable, of a
// TryAcquire that found every connection of the Locker's pool pinned by a
// held or waiting lock. Acquire waits for a connection instead, within its
// context. Raise pool_max_conns (or MaxConns) to hold more locks at once.
var ErrPoolExhausted = errors.New("postgres: every pool connection is pinned by a held or waiting lock")

func init() {
	locker.Register(Scheme, locker.BackendOpener(open))
	locker.Register("postgresql", locker.BackendOpener(open))
}

// Config names the database objects of a Locker. The zero value uses
// DefaultSchema and DefaultTable.
type Config struct {
	// Schema holds the table and its sequence; created if missing.
	Schema string
	// Table is the lock table; its token sequence is Table + "_token". At
	// most 57 bytes, so that the sequence name fits PostgreSQL's 63.
	Table string
	// SkipSchemaCreation, when true, never runs the DDL of schema.sql: the
	// objects must have been created by a migration.
	SkipSchemaCreation bool
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	return c
}

// New returns a Locker over pool, which the caller keeps owning: Close of the
// Locker releases the connections its locks pinned but does not close pool.
// The pool's MaxConns bounds the locks the Locker holds or waits for at
// once. opts set Locker-wide defaults (locker.WithTTL and the like).
//
// A pool the caller built keeps pgx's default context handling; see the
// package documentation for what a cancelled Acquire costs.
func New(pool *pgxpool.Pool, cfg Config, opts ...locker.Option) (locker.Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: postgres: nil pool", locker.ErrInvalidOption)
	}
	b, err := newBackend(pool, cfg, false)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	return locker.New(b, opts...)
}

// NewFromConfig creates a pool from poolConfig and returns a Locker that owns
// it: Close closes the pool. It does not connect; the first acquisition does.
func NewFromConfig(poolConfig *pgxpool.Config, cfg Config, opts ...locker.Option) (locker.Locker, error) {
	if poolConfig == nil {
		return nil, fmt.Errorf("%w: postgres: nil pool config", locker.ErrInvalidOption)
	}
	// Validate the names before creating a pool that would need closing.
	if _, err := newNames(cfg.withDefaults().Schema, cfg.withDefaults().Table); err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolConfig)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	b, err := newBackend(pool, cfg, true)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	l, err := locker.New(b, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return l, nil
}

// open is the Opener of the postgres and postgresql schemes: the libpq URL,
// with pgx's pool parameters (pool_max_conns …) and this package's table and
// schema parameters, which are removed before pgx parses the rest.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: query: %v", locker.ErrInvalidURL, err)
	}
	var cfg Config
	for _, p := range []struct {
		name string
		dst  *string
	}{{"schema", &cfg.Schema}, {"table", &cfg.Table}} {
		if v, ok := q[p.name]; ok {
			if len(v) != 1 || v[0] == "" {
				return nil, fmt.Errorf("%w: postgres: query parameter %s: want one non-empty value", locker.ErrInvalidURL, p.name)
			}
			*p.dst = v[0]
			q.Del(p.name)
		}
	}
	cfg = cfg.withDefaults()
	if _, err := newNames(cfg.Schema, cfg.Table); err != nil {
		return nil, fmt.Errorf("%w: postgres: query parameter: %v", locker.ErrInvalidURL, err)
	}
	if !q.Has("pool_max_conns") {
		q.Set("pool_max_conns", fmt.Sprint(DefaultMaxConns))
	}
	rest := *u
	rest.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(rest.String())
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("%w: %v", locker.ErrInvalidURL, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %v", locker.ErrInvalidURL, err)
	}
	// Fail at Open, not at the first lock, when the server cannot be reached.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connecting: %w", err)
	}
	b, err := newBackend(pool, cfg, true)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: postgres: %v", locker.ErrInvalidURL, err)
	}
	return b, nil
}

// backend is the driver.Backend over one pool.
type backend struct {
	pool    *pgxpool.Pool
	ownPool bool
	skipDDL bool
	n       names
	schema  *onceCtx

	// slots bounds the connections pinned by held and waiting locks, so that
	// TryAcquire can fail at once when there is none left instead of
	// waiting on the pool.
	slots chan struct{}

	mu     sync.Mutex
	locks  map[*lock]struct{} // held locks, released by Close
	closed bool
}

func newBackend(pool *pgxpool.Pool, cfg Config, own bool) (*backend, error) {
	cfg = cfg.withDefaults()
	n, err := newNames(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	return &backend{
		pool:    pool,
		ownPool: own,
		skipDDL: cfg.SkipSchemaCreation,
		n:       n,
		schema:  newOnceCtx(),
		slots:   make(chan struct{}, pool.Config().MaxConns),
		locks:   map[*lock]struct{}{},
	}, nil
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

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	select {
	case b.slots <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w (pool_max_conns=%d)", ErrPoolExhausted, cap(b.slots))
	}
	return b.acquire(ctx, req, true)
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free pool connection (pool_max_conns=%d): %w", cap(b.slots), ctx.Err())
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
	b.mu.Unlock()
	for _, l := range held {
		l.abandon()
	}
	if b.ownPool {
		b.pool.Close()
	}
	return nil
}
