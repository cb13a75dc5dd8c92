// Package postgres is the PostgreSQL backend of locker (pgx v5): a held lock
// is a row lock (SELECT … FOR UPDATE) in a transaction left open on a pool
// connection the lock pins; the server ends it after the TTL of silence.
//
//	l, err := postgres.New(pool, postgres.WithTable("locks"), locker.WithTTL(30*time.Second))
//	l, err := locker.Open(ctx, "postgres://app@db/app?sslmode=verify-full&table=locks&max_conns=32")
//
// New takes a *pgxpool.Pool the caller keeps owning. Open (schemes postgres
// and postgresql) takes the libpq URL pgx accepts, connects once, and makes
// a pool the Locker closes; locker's ttl, namespace and owner parameters
// apply, these are this package's options, the rest goes to pgx (libpq's
// sslmode, sslrootcert, sslcert, sslkey …); an unknown one is ErrInvalidURL:
//
//	parameter             option                  default
//	schema                WithSchema              public
//	table                 WithTable               locker_locks (sequence: table + "_token")
//	max_conns             WithMaxConns            a quarter of the server's max_connections
//	skip_schema_creation  WithSkipSchemaCreation  false (creates schema.sql's objects on first use)
//	mode                  WithMode                for_update (or advisory, below)
//
// Every held lock, waiting Acquire and Watch pins one connection, at most
// max_conns a Locker; beyond, TryAcquire and Watch fail with ErrUnavailable
// wrapping ErrPoolExhausted and Acquire waits, in PostgreSQL's lock queue.
// N-permit locks are permit rows taken FOR UPDATE SKIP LOCKED; a minimum
// hold is waited out by the next holder on the server's clock.
//
// WithMode(Advisory) holds each lock as a session-level advisory lock on a
// hash of the key, many on each of a few shared connections (10,000 on four);
// idle_session_timeout (PostgreSQL 14+) ends a silent client's locks, and a
// connection that ends loses every lock on it. It has no inspection, Watch,
// values, permits or minimum holds, and keys whose hashes collide exclude
// each other. Never use both modes on one table.
//
// Tokens come from a NO CYCLE sequence raised to the server clock after a
// restart or failover (they increase unless that clock goes back, or a
// promoted replica's lags the old primary's by more than the failover
// took). Guard is a fencing.Guard in a table: admission and write commit
// together (Write, AdmitTx).
//
// Production: sslmode=verify-full, sslrootcert, SCRAM, the password in the
// URL or PGPASSWORD; refusals (SQLSTATE class 28, 42501) are
// locker.ErrUnauthorized. With skip_schema_creation=true no DDL runs, and
// Open checks the objects (ErrInvalidOption) and the role's grants
// (ErrUnauthorized): the owner runs SchemaSQL, GrantSQL gives
//
//	GRANT USAGE ON SCHEMA s TO app;
//	GRANT SELECT, INSERT, UPDATE ON TABLE s.locker_locks TO app;
//	GRANT USAGE, SELECT, UPDATE ON SEQUENCE s.locker_locks_token TO app;
//
// Caveats: roles do not isolate advisory locks, pg_locks or labels. Mutual
// exclusion does not survive a crash of the server's host or a failover:
// only the token protects the resource then. A pooler's
// idle_transaction_timeout must exceed the longest TTL.
//
// Why: docs/design/postgres.md, docs/design/security-postgres.md.
package postgres
