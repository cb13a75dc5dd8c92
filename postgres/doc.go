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
// apply, these are this package's options, the rest goes to pgx, and one
// that neither pgx nor the server knows is locker.ErrInvalidURL:
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
// Inspect and List read the catalog without locking; Watch LISTENs. N-permit
// locks are permit rows taken FOR UPDATE SKIP LOCKED (Acquire in arrival
// order); a minimum hold is waited out by the next holder on the server's
// clock (a holder that dies inside it frees the lock at the later of the
// hold's end and its TTL's).
//
// WithMode(Advisory) holds each lock as a session-level advisory lock on a
// hash of the key, many on each of a few shared connections (10,000 on four);
// idle_session_timeout (PostgreSQL 14+) ends a silent client's locks, and a
// connection that ends loses every lock on it. It has no inspection, Watch,
// values, permits or minimum holds, and keys whose hashes collide exclude
// each other. Never use both modes on one table.
//
// Tokens come from a NO CYCLE sequence, raised to the server clock in
// microseconds after a restart: they increase across crashes and restarts
// provided the server's clock does not go back. Guard (Write, AdmitTx) is a
// fencing.Guard in a table of the database that admits a token and applies a
// write in one transaction.
//
// Caveats: mutual exclusion does not survive a crash of the server's host or
// a failover (the old holder's half-open connection sends no FIN, the new
// server grants the lock at once): only the token protects the resource
// then, and behind a pooler (PgBouncer) the backend detects the new server
// only at the next token or refresh. A pooler's idle_transaction_timeout
// must exceed the longest TTL.
//
// How it works, and why: docs/design/postgres.md.
package postgres
