package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// N-permit locks. A key used with a limit N > 1 has, beside its lock row
// (which keeps N in its permits column), N permit rows (permitRowsSQL). A
// permit holder's lock transaction holds the lock row FOR SHARE — so that
// a lock (FOR UPDATE) and a change of N wait for, or refuse, every permit —
// and one permit row FOR UPDATE, found with SKIP LOCKED. An Acquire queues
// for the key's queue lock, a session advisory lock (FIFO in the server's
// lock manager): only the first in the queue looks for a free permit, and
// while there is none it waits for a release's NOTIFY, or for the time at
// which a holder's TTL or a minimum hold ends (which nobody notifies). A
// TryAcquire does not queue: it takes a free permit if there is one.

// maxLimit bounds a key's limit: one row per permit.
const maxLimit = 10000

// permitRowsSQL is an array expression of the permit rows of key k (a
// bytea parameter) with limit n: 0xfe || key || 0x00 || its number in two
// bytes (no lock key starts with 0xfe, which is not UTF-8; the fixed-length
// tail keeps the rows of keys with NUL bytes apart).
func permitRowsSQL(k, n string) string {
	return "ARRAY(SELECT decode('fe', 'hex') || " + k + "::bytea || decode('00', 'hex') || substring(int4send(i) FROM 3 FOR 2) " +
		"FROM generate_series(0, " + n + "::int - 1) AS i)"
}

// queueLock is the session advisory lock acquisitions of key's permits
// queue for.
func (b *backend) queueLock(key string) int64 {
	sum := sha256.Sum256([]byte(b.n.table + "\x00permits\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// The statements of a permit acquisition.
func (b *backend) permitSetupSQL() []string {
	t := b.n.table
	return []string{
		// The lock row, with the limit if it is new.
		"INSERT INTO " + t + " (key, permits) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
		// The limit, changed only if nobody holds the lock row: neither a
		// lock nor a permit (which holds it FOR SHARE).
		"UPDATE " + t + " SET permits = $2 WHERE key = (SELECT key FROM " + t +
			" WHERE key = $1 AND permits IS DISTINCT FROM $2 FOR UPDATE SKIP LOCKED)",
		// The permit rows.
		"INSERT INTO " + t + " (key) SELECT unnest(" + permitRowsSQL("$1", "$2") + ") ON CONFLICT (key) DO NOTHING",
	}
}

func (b *backend) shareSQL(try bool) string {
	s := "SELECT permits FROM " + b.n.table + " WHERE key = $1 FOR SHARE"
	if try {
		s += " NOWAIT"
	}
	return s
}

// probeSQL locks a free permit row of key $1 (limit $2), if any, skipping
// the held ones and those whose holder record shows a minimum hold that
// lasts (checked again after the lock, by tokenSQL: this statement's
// snapshot may predate a record committed before its holder let go).
func (b *backend) probeSQL() string {
	return "SELECT key FROM " + b.n.table + " AS p WHERE key = ANY(" + permitRowsSQL("$1", "$2") + ") " +
		"AND NOT EXISTS (SELECT 1 FROM " + b.n.table + " AS r WHERE r.key = decode('ff', 'hex') || p.key AND r.held_until > clock_timestamp()) " +
		"LIMIT 1 FOR UPDATE SKIP LOCKED"
}

// attemptPermit takes a permit of req.Key, limit req.Limit: on success the
// connection is left in the lock transaction holding the lock row FOR SHARE
// and the permit's row FOR UPDATE. An Acquire queues for the key's queue
// lock, outside any transaction (a NOTIFY reaches a session only between
// transactions), and then, first in the queue, looks for a free permit in a
// transaction, waiting between looks. A failed acquisition leaves session
// state (advisory locks, LISTEN, idle_session_timeout) that acquire clears
// (cleanPermitConn). In the queue, an Acquire's statements end by a cancel
// request (waitOn), which keeps the connection: pgx's closing of it would
// leave the Acquire's place in the queue to the server's noticing of the
// closed socket, after Acquire has returned.
func (b *backend) attemptPermit(ctx context.Context, conn *pgx.Conn, req *driver.Request, try bool, st *connState) (outcome, grant, error) {
	if req.Limit > maxLimit {
		return 0, grant{}, fmt.Errorf("%w: postgres: a limit of %d: at most %d (a row per permit)", locker.ErrInvalidOption, req.Limit, maxLimit)
	}
	key, n := []byte(req.Key), int32(req.Limit)
	batch := &pgx.Batch{}
	for _, q := range b.permitSetupSQL() {
		batch.Queue(q, key, n)
	}
	if !try {
		if st.idleSession {
			// The server ends the session of a waiter that stays silent
			// between its looks for the TTL (a frozen client), and so its
			// place in the queue.
			batch.Queue("SELECT set_config('idle_session_timeout', $1, false)", millis(req.TTL))
		}
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return 0, grant{}, fmt.Errorf("preparing the permits: %w", err)
	}
	q := b.queueLock(req.Key)
	if !try {
		// First in the queue, it holds the key's watch lock shared, which
		// makes releases of the key notify (as for a Watch), and listens.
		// Only the first listens: the others, blocked in the queue, would
		// hold back the server's notification queue. A release notified
		// before the LISTEN commits is seen by the look that follows.
		batch := &pgx.Batch{}
		batch.Queue("SELECT pg_advisory_lock($1)", q)
		batch.Queue("SELECT pg_advisory_lock_shared($1)", b.watchLock(req.Key))
		batch.Queue("LISTEN " + pgx.Identifier{b.n.channel}.Sanitize())
		err := waitOn(ctx, conn, true, func(bctx context.Context) error { return conn.SendBatch(bctx, batch).Close() })
		if err != nil {
			return 0, grant{}, fmt.Errorf("waiting in the queue: %w", err)
		}
	}
	for {
		wakeups.Add(1)
		out, g, err := b.look(ctx, conn, req, try, st)
		if err != nil || out != minHeld {
			g.listened = !try
			return out, g, err
		}
		if try {
			return 0, grant{}, locker.ErrLocked
		}
		if err := waitOn(ctx, conn, true, func(bctx context.Context) error { return rollback(bctx, conn) }); err != nil {
			return 0, grant{}, err
		}
		if err := b.awaitPermit(ctx, conn, req); err != nil {
			return 0, grant{}, err
		}
	}
}

// look begins a lock transaction, takes the lock row FOR SHARE and a free
// permit row, if any, in one round trip, and its token in a second, where
// an Acquire also leaves the queue if it got the permit. It reports minHeld
// if no permit is free (the caller rolls back).
func (b *backend) look(ctx context.Context, conn *pgx.Conn, req *driver.Request, try bool, st *connState) (outcome, grant, error) {
	var (
		limit *int32
		found bool
		row   []byte
	)
	batch := queueBegin(req, st)
	batch.Queue(b.shareSQL(try), []byte(req.Key)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&limit); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	batch.Queue(b.probeSQL(), []byte(req.Key), int32(req.Limit)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&row); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	err := waitOn(ctx, conn, !try, func(bctx context.Context) error { return conn.SendBatch(bctx, batch).Close() })
	switch {
	case try && isLockNotAvailable(err):
		// A lock (limit 1) holds the row, or the limit is being changed.
		return 0, grant{}, locker.ErrLocked
	case err != nil:
		return 0, grant{}, fmt.Errorf("looking for a free permit: %w", err)
	case !found:
		return rowMissing, grant{}, nil
	case limit == nil || *limit != int32(req.Limit):
		stored := 1
		if limit != nil {
			stored = int(*limit)
		}
		return 0, grant{}, limitMismatch(stored, req.Limit)
	case row == nil:
		return minHeld, grant{}, nil
	}
	var (
		out outcome
		g   grant
	)
	batch = &pgx.Batch{}
	b.queueToken(batch, req, string(row)).QueryRow(func(r pgx.Row) error {
		out, g, err = scanToken(r, st.ident)
		return err
	})
	if !try {
		// Out of the queue, unless the permit's minimum hold lasts (the
		// condition of tokenSQL's last column): the next in it looks for the
		// next permit.
		batch.Queue("SELECT pg_advisory_unlock_all() WHERE NOT coalesce((SELECT held_until > clock_timestamp() FROM "+
			b.n.table+" WHERE key = $1), false)", recordKey(string(row)))
	}
	if cerr := waitOn(ctx, conn, !try, func(bctx context.Context) error { return conn.SendBatch(bctx, batch).Close() }); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return 0, grant{}, err
	}
	g.row = row
	return out, g, nil
}

// awaitPermit waits, first in the queue, until a permit may be free: a
// release's NOTIFY, or the time when the first of the holders' TTLs or of
// the minimum holds ends (a permit that ends so is notified by nobody),
// and at the latest half the TTL, so that the server does not end the
// waiter's session for its silence.
func (b *backend) awaitPermit(ctx context.Context, conn *pgx.Conn, req *driver.Request) error {
	var ds []described
	err := waitOn(ctx, conn, true, func(bctx context.Context) (err error) {
		ds, err = b.describe(bctx, conn, "key = ANY("+permitRowsSQL("$3", "$4")+")", req.Limit, []byte(req.Key), int32(req.Limit))
		return err
	})
	if err != nil {
		return fmt.Errorf("describing the permits: %w", err)
	}
	wait := req.TTL / 2
	for _, d := range ds {
		if !d.info.Held {
			continue
		}
		left := d.info.TTL
		if left < 0 {
			left = d.ttl // the holder's idle time is hidden: its whole TTL from now
		}
		wait = min(wait, left+10*time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	want := payload(req.Key)
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return nil // time to look again
		case err != nil:
			return fmt.Errorf("waiting for a permit: %w", err)
		case n.Payload == want:
			return nil
		}
	}
}

// queueUnlisten queues what ends a permit wait's session settings.
func queueUnlisten(batch *pgx.Batch, conn *pgx.Conn) {
	batch.Queue("UNLISTEN *")
	if st, _ := conn.PgConn().CustomData()[connStateKey].(*connState); st != nil && st.idleSession {
		batch.Queue("RESET idle_session_timeout")
	}
}

// cleanPermitConn takes what a failed permit acquisition left off the
// session — its transaction, advisory locks and LISTEN — so that the
// connection may go back to the pool, or else closes it.
func cleanPermitConn(conn *pgxpool.Conn) {
	pg := conn.Conn().PgConn()
	if pg.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	batch := &pgx.Batch{}
	batch.Queue("ROLLBACK")
	batch.Queue("SELECT pg_advisory_unlock_all()")
	queueUnlisten(batch, conn.Conn())
	if err := conn.Conn().SendBatch(ctx, batch).Close(); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}
