// Package postgres is the PostgreSQL backend of locker (pgx v5): a held lock
// is a row lock (SELECT … FOR UPDATE) in a transaction left open on a pool
// connection the lock pins; the server ends it after the TTL of silence.
//
//	l, err := postgres.New(pool, postgres.WithTable("locks"), locker.WithTTL(30*time.Second))
//	l, err := locker.Open(ctx, "postgres://app@db/app?sslmode=verify-full&table=locks&max_conns=32")
//
// New takes a *pgxpool.Pool the caller keeps owning. Open (schemes postgres
// and postgresql) connects once and makes a pool the Locker closes; its URL
// is libpq's, as pgx reads it (sslmode, sslrootcert …), plus locker's ttl,
// namespace and owner and these; an unknown parameter is ErrInvalidURL:
//
//	parameter             option                  default
//	schema                WithSchema              public
//	table                 WithTable               locker_locks (sequence: table + "_token")
//	max_conns             WithMaxConns            a quarter of the connections the server allows ordinary roles
//	skip_schema_creation  WithSkipSchemaCreation  false (creates schema.sql's objects on first use)
//	mode                  WithMode                for_update (or advisory, below)
//
// Each held lock, waiting Acquire and Watch pins a connection, max_conns at
// most: beyond, TryAcquire and Watch fail (ErrUnavailable wrapping
// ErrPoolExhausted) and Acquire waits. Waiters are served in arrival order.
//
// WithMode(Advisory) holds session-level advisory locks, many on each of a
// few shared connections (10,000 on four; PostgreSQL 14+): a connection that
// ends loses every lock on it, keys whose hashes collide exclude each other,
// and there is no inspection, Watch, value, permit or minimum hold.
//
// Tokens come from a NO CYCLE sequence raised to the server clock after a
// restart or failover: they increase unless that clock goes back, or a
// promoted replica's lags the old primary's by more than the failover took.
// Guard is a fencing.Guard in a table: admission and write commit together.
//
// Production: sslmode=verify-full, SCRAM; refusals (SQLSTATE 28xxx, 42501) are
// locker.ErrUnauthorized. skip_schema_creation=true runs no DDL and checks the
// objects (ErrInvalidOption) and grants (ErrUnauthorized; SchemaSQL, GrantSQL).
//
// Caveats: never use both modes on one table. Roles do not isolate advisory
// locks, pg_locks or labels. Mutual exclusion does not survive a crash of the
// server's host, a failover, a step of the server's clock ahead (its session
// timeouts run on it), or a connection closed on the way (the server frees
// the lock as it sees the close, before Done tells the holder): only the
// token protects the resource then. A pooler's idle_transaction_timeout must
// exceed the longest TTL.
// Design: docs/design/postgres.md; production: docs/design/security-postgres.md.
package postgres
