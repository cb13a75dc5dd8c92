// Package sqlguard is a fencing guard over database/sql, for a resource kept
// in PostgreSQL or SQLite: a fence table holds the highest token admitted
// per resource, and a write carrying a lower token is refused.
//
//	g, err := sqlguard.New(db) // db *sql.DB; you keep owning it
//	err = g.Write(ctx, "account/42", lease.Token(), func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 30 WHERE id = 42")
//		return err
//	})
//	if errors.Is(err, fencing.ErrStaleToken) { /* a newer holder has written */ }
//
// Write admits the token and runs the write in one transaction; AdmitTx does
// the admission inside a transaction of yours; Admit (fencing.Guard) alone
// protects nothing written after it returns. Token 0 is refused as stale;
// tokens above 2^63-1 with ErrTokenRange; an empty resource, or one with NUL
// or invalid UTF-8, with locker.ErrInvalidKey.
//
// The admission is one statement, INSERT … ON CONFLICT (resource) DO UPDATE
// SET token = excluded.token WHERE stored token <= excluded.token: an
// affected row means admitted. The row lock it takes lasts until the
// transaction ends, so concurrent writers of one resource are serialized
// and a lower token arriving meanwhile is refused once the higher commits.
// At PostgreSQL's READ COMMITTED (its default) statements after the
// admission see every write committed under earlier tokens; at REPEATABLE
// READ or SERIALIZABLE a writer that raced another may fail with a
// serialization error (SQLSTATE 40001) instead: roll back, retry. SQLite serializes all
// writers; open it with a busy timeout (modernc.org/sqlite:
// _pragma=busy_timeout(10000)), and admit first in the transaction or begin
// it IMMEDIATE (_txlock=immediate), else a writer may fail with SQLITE_BUSY.
//
// The dialect is detected from the driver's package (pgx stdlib, lib/pq, any
// package path containing "sqlite"); WithDialect sets it. The table,
// DefaultTable or WithTable (and WithSchema), is created if missing on
// first use, on a connection of its own (SQLite's AdmitTx: in your
// transaction); WithCreateTable(false) leaves it to your migrations. Columns: resource text primary key, token
// 64-bit integer > 0 (PostgreSQL: the postgres backend's Guard table).
// MySQL is not supported: untested, and it counts an upsert that leaves a
// row as it was as no affected row. The table keeps the highest token
// across restarts as durably as the database keeps any commit.
package sqlguard
