// Package postgres is the PostgreSQL backend of locker, on pgx v5 and
// pgxpool: a held lock is a row lock (SELECT … FOR UPDATE) in a transaction
// left open on a connection the lock pins.
//
// # Use
//
// From a pool you already have (you keep owning it):
//
//	l, err := postgres.New(pool, postgres.Config{}, locker.WithTTL(30*time.Second))
//
// from a pgxpool.Config (the Locker owns and closes the pool), with
// NewFromConfig; or from a URL, after importing the package:
//
//	l, err := locker.Open(ctx, "postgres://app@db:5432/app?sslmode=verify-full&table=locks&schema=infra&pool_max_conns=32")
//
// Both the postgres and the postgresql scheme are registered. The URL is the
// libpq URL pgx accepts (sslmode, connect_timeout, pool_max_conns, … — see
// pgxpool.ParseConfig), plus table and schema, which this package removes
// before pgx sees the URL, and locker's own ttl, namespace and owner. Open
// connects once (Ping) so that an unreachable server is reported at once as
// locker.ErrUnavailable. Without pool_max_conns the pool has DefaultMaxConns
// connections.
//
// # Schema
//
// On first use the backend creates the schema (if missing), the table
// (default public.locker_locks) and its token sequence (the table's name +
// "_token"), in one transaction under a transaction-scoped advisory lock so
// that processes starting together do not race; it skips the DDL when the
// table and sequence exist, so a role without the CREATE privilege works
// against objects made by a migration. The DDL is schema.sql in this
// package, commented for teams that run it themselves (with
// Config.SkipSchemaCreation). Names are quoted identifiers
// (pgx.Identifier.Sanitize): any character is allowed; names PostgreSQL
// would truncate (more than 63 bytes, 57 for the table) or cannot hold (NUL,
// invalid UTF-8) are refused with locker.ErrInvalidOption, or
// locker.ErrInvalidURL from a URL.
//
// Keys are stored as bytea and always passed as bound parameters: a
// namespaced key contains a NUL byte, which text cannot hold, and bytea maps
// distinct keys to distinct rows byte for byte. Rows are created on a key's
// first use, in a statement of their own that commits at once (an uncommitted
// insert would make a concurrent TryAcquire wait on the unique index), and
// are never deleted by the backend; schema.sql shows a statement that prunes
// unheld rows safely.
//
// # Acquire, refresh, release
//
// An acquisition pins a pool connection and sends one pipelined batch (one
// round trip): BEGIN; set_config of idle_in_transaction_session_timeout to
// the TTL (plus lock_timeout, statement_timeout and, on PostgreSQL 17 and
// later, transaction_timeout to 0, so that whatever the role's defaults only
// the caller's context bounds a wait and only the TTL of silence a hold, and
// application_name to "locker " + the WithOwner label, for inspection in
// pg_stat_activity); SELECT … FOR UPDATE
// on the key's row (NOWAIT for TryAcquire, whose SQLSTATE 55P03 becomes
// locker.ErrLocked); and the fencing token. The first use of a key, or of a
// connection, adds a few round trips once.
//
// Acquire waits in PostgreSQL's own lock queue: no polling, and waiters are
// served in arrival order. When its context ends, a cancel request takes
// the backend out of the queue, and Acquire returns once the server has
// confirmed (or after 2 s without an answer, having dropped the connection).
// pgx's own context handling would only close the socket, which a backend
// waiting for a lock does not read: it would stay queued and be granted the
// lock, uselessly, before the next waiter. A wait longer than a quarter of
// the TTL is followed by one refresh, so that the lease's local deadline
// counts from the grant rather than from the request.
//
// A held lock's connection sits idle in its transaction. The server ends
// the session — and with it the transaction and the lock — when the holder
// stays silent for the TTL (the TTL is rounded up to whole milliseconds;
// TTLs beyond 2^31-1 ms are refused). Refresh is one cheap statement that
// resets that timer (any statement does) and sets it to the TTL again.
// Release is ROLLBACK: the lock transaction wrote nothing worth keeping, and
// a rollback, unlike a commit, waits for no WAL flush. A dead client's
// connection drops, its transaction aborts, the row is free; a client that
// is cut off is cut off by the server after the TTL.
//
// While a lock is held, a goroutine reads its idle connection, so a session
// the server ends (idle timeout, pg_terminate_backend, shutdown) or a broken
// connection ends the lease at once, through Done, rather than at the next
// refresh. Any failed refresh or release drops the connection, which frees
// the row on the server, and reports locker.ErrLeaseLost.
//
// # Pool
//
// Every held lock and every waiting Acquire pins one connection, so the
// pool's MaxConns bounds what one Locker can hold or wait for at once. When
// every connection is pinned, Acquire waits for one within its context, and
// TryAcquire fails at once with locker.ErrUnavailable wrapping
// ErrPoolExhausted — never ErrLocked, never a silent wait. Other users of a
// shared pool (New) compete for the same connections.
//
// # Fencing tokens
//
// A token is nextval of the table's NO CYCLE, CACHE 1 sequence, taken in the
// lock transaction after the row lock is granted: within one life of the
// server, tokens strictly increase in grant order for every key, with no
// dependence on any clock.
//
// A sequence's advance is made durable only when some transaction that
// wrote WAL commits, and a lock transaction never commits; after a crash the
// sequence can come back below tokens already handed out. The backend closes
// that hole with a floor: whenever a connection is first used, and whenever
// a token is not above the server's start time in microseconds
// (pg_postmaster_start_time, checked in the same statement as nextval), it
// raises the sequence to the server clock in microseconds (clock_timestamp)
// if it is below, under an advisory lock (so raises never interleave and the
// sequence never moves down). The raise itself need not be durable: if a
// crash loses it, every token taken above it is below the crash time, and
// the first connection after the crash raises the sequence again, to a later
// clock. Tokens are therefore at least the microsecond timestamp of the
// server's start (about 1.7e15 in 2024).
//
// The guarantee across crashes: every token issued after PostgreSQL restarts
// (or recovers from a backend crash, which kills every session) is larger
// than every token issued before, including tokens of lock transactions that
// never committed, provided (1) the server's wall clock at the restart is
// later than it was at the crash, and (2) the sequence never ran ahead of the
// clock, i.e. on average fewer than one token per microsecond was issued
// since the last raise — a million locks a second, far beyond what one
// PostgreSQL server grants.
//
// # Host crashes and failover
//
// Mutual exclusion does not survive a crash of the server's host or a
// failover to a replica: the old holder's half-open connection sends no FIN,
// and the new server grants the lock at once, before the old holder's
// deadline; only the token protects the resource then. Tokens stay
// increasing across a failover only as across a restart with the replica's
// clock. Behind a pooler (PgBouncer) the client's connection survives a
// failover, so neither floor check above fires by itself (the connection is
// not new; the replica's start time is older than issued tokens). The
// backend therefore reads the server's identity — its start time and the
// time of the last transaction it replayed as a standby, which a promotion
// leaves set — with every token and every refresh: a connection that meets
// another identity raises the floor again, and a refresh that finds another
// identity than at the grant, or the server in recovery, reports the lease
// lost. (The system identifier cannot tell a promoted replica from its
// primary, which share it.)
//
// The cost: the start-time comparison rides on the token statement, so a
// lock on a warm connection pays no extra round trip for it (the figures of
// BenchmarkUncontended include it); the raise is one round trip (a
// transaction with synchronous_commit off: no WAL flush) per new connection
// and after a restart.
//
// # Poolers
//
// Behind a transaction-mode pooler (PgBouncer) locking still works: a lock
// lives entirely in one transaction, which the pooler keeps on one server
// connection until it ends. The pooler's own timeouts then bound a lock too:
// idle_transaction_timeout ends the server connection (and the lock) after
// it, so set it above the longest TTL or the lease is lost early (the backend
// reports the loss); query_timeout bounds a waiting Acquire. pgx's prepared
// statement cache needs a pooler that tracks protocol-level prepared
// statements (PgBouncer ≥ 1.21 with max_prepared_statements), or
// default_query_exec_mode=exec in the URL. One caveat: the pooler reconnects
// to a restarted server on its own, so the per-connection floor check does
// not see a crash recovery that kept the postmaster's start time; the
// per-token identity check still covers full restarts and promotions.
//
// # SQL fencing guard
//
// Guard is a fencing.Guard over a table of the highest token per resource
// (guard.sql). AdmitTx admits a token inside the caller's own pgx.Tx, so the
// check and the protected write commit together:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := guard.AdmitTx(ctx, tx, "invoice/42", lease.Token()); err != nil {
//			return err // fencing.ErrStaleToken: a newer holder has written
//		}
//		_, err := tx.Exec(ctx, "UPDATE invoices SET … WHERE id = 42")
//		return err
//	})
//
// It is one INSERT … ON CONFLICT DO UPDATE … WHERE stored <= new statement;
// zero rows means a stale token.
package postgres
