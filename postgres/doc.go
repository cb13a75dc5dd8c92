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
// Every held lock, waiting Acquire and Watch pins one connection: a Locker
// pins at most max_conns (and all but one of the pool's MaxConns, which
// Open makes one larger); beyond, TryAcquire and Watch fail with
// locker.ErrUnavailable wrapping ErrPoolExhausted and Acquire waits.
// Waiters queue in PostgreSQL's own lock queue, in arrival order. TTLs
// count whole milliseconds.
//
// locker.Inspect and List read the catalog and never lock (the time left
// and grant time need the holder's role or pg_read_all_stats); values
// (WithValue, Publish) are committed by another pool connection; Watch
// LISTENs, notified at grant, release and publication, and looks again
// when a holder's time is up (a lock that ends otherwise notifies nobody).
//
// N-permit locks (locker.WithLimit) are permit rows taken FOR UPDATE SKIP
// LOCKED under the key's row held FOR SHARE, which keeps the limit while a
// permit is held. Acquire queues in arrival order; only the first in line
// looks, woken by a release's NOTIFY or when a holder's time is up;
// TryAcquire takes any free permit; Inspect shows the earliest permit's
// holder; Guard admits one holder's tokens, not N. A minimum hold
// (locker.WithMinHold) is waited out by the next holder on the server's
// clock: a holder that dies inside it frees the lock at the later of the
// hold's end and its TTL's. Not given: a lock's blocking Acquire on a key
// held by permits waits for them all rather than failing.
//
// WithMode(Advisory) holds a lock instead as a session-level advisory lock
// (pg_try_advisory_lock on a 64-bit hash of the key; keys whose hashes
// collide exclude each other) on one of up to four shared connections per
// TTL: 10,000 locks on four connections. Its token is drawn in the grant's
// statement; idle_session_timeout (PostgreSQL 14+) set to the session's
// largest TTL ends a silent client's locks; a connection that ends loses
// every lock on it, each reported lost at the next statement on it. Acquire
// waits in pg_advisory_lock on a connection of its own, which then holds
// the lock. Inspection, Watch, values, permits and minimum holds are
// ErrUnsupported in this mode. Never use both modes on one table.
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
