package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// SQLSTATE codes the backend tells apart.
const (
	codeLockNotAvailable = "55P03" // FOR UPDATE NOWAIT found the row locked
	codeUndefinedObject  = "42704" // e.g. an unrecognized run-time parameter at connect
)

// cancelTimeout bounds the cancel request that takes a cancelled Acquire out
// of PostgreSQL's lock queue: on a healthy server it takes one round trip.
const cancelTimeout = 2 * time.Second

// maxAttempts bounds the retries of one acquisition that found its row
// missing (first use of a key, or rows pruned meanwhile) or the token
// sequence below its floor (first use after a server restart).
const maxAttempts = 8

// connStateKey keys what the backend knows of a connection (a *connState
// in pgconn's CustomData), learnt when the connection is first used.
const connStateKey = "github.com/distlock/locker/postgres.conn"

// connState is what the backend knows of one connection.
type connState struct {
	// txTimeout: the server has transaction_timeout (PostgreSQL 17 and
	// later), which the lock transaction must clear as well.
	txTimeout bool
	// ident is the server's identity when this connection last checked the
	// token floor: a connection that meets another (a pooler moved it to a
	// restarted or promoted server) checks the floor again.
	ident serverIdent
}

// serverIdent tells one life of a server from the next without reading the
// control file: its start time, and the time of the last transaction it
// replayed as a standby (0 if it never was one since it started), which a
// promotion leaves set. The system identifier would not do: a physical
// replica shares its primary's.
type serverIdent struct{ start, replayed int64 } // microseconds since 1970

// identSQL selects a serverIdent.
const identSQL = "(extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint, " +
	"coalesce((extract(epoch FROM pg_last_xact_replay_timestamp()) * 1000000)::bigint, 0)"

// floor is the value every token of this server life must exceed.
func (id serverIdent) floor() int64 { return max(id.start, id.replayed) }

type outcome int

const (
	granted    outcome = iota
	rowMissing         // the key has no row yet: insert it and try again
	belowFloor         // the sequence is below this server life's floor: raise it and try again
)

// acquire pins a pool connection and takes req.Key on it; the caller holds a
// slot, which is handed over to the lock or freed.
func (b *backend) acquire(ctx context.Context, req *driver.Request, try bool) (driver.Lock, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		b.freeSlot()
		return nil, fmt.Errorf("getting a pool connection: %w", err)
	}
	l, err := b.lockOn(ctx, conn, req, try)
	if err != nil {
		// Idle connections go back to the pool; closed ones, and ones left in
		// a transaction, are destroyed, which ends the transaction on the
		// server (pgxpool.Conn.Release).
		conn.Release()
		b.freeSlot()
		return nil, err
	}
	return l, nil
}

func (b *backend) lockOn(ctx context.Context, conn *pgxpool.Conn, req *driver.Request, try bool) (*lock, error) {
	if err := b.ensureSchema(ctx, conn.Conn()); err != nil {
		return nil, err
	}
	pg := conn.Conn().PgConn()
	st, _ := pg.CustomData()[connStateKey].(*connState)
	if st == nil {
		// A new session: the server may have crashed and restarted without
		// a new start time (crash recovery after a backend died), losing
		// sequence advances of transactions that never committed.
		var err error
		if st, err = b.firstUse(ctx, conn.Conn()); err != nil {
			return nil, err
		}
		pg.CustomData()[connStateKey] = st
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		out, g, err := b.attempt(ctx, conn.Conn(), req, try, st)
		if err != nil {
			return nil, err
		}
		switch out {
		case granted:
			if !try && time.Since(start) > req.TTL/4 {
				// The wait was long: the server's idle timer started when the
				// lock was granted, but all we know is when we asked. Restart
				// it now so that the local deadline is not cut short by the
				// wait (or already past).
				start = time.Now()
				if _, err := conn.Exec(ctx, idleTimeoutSQL, millis(req.TTL)); err != nil {
					return nil, fmt.Errorf("restarting the idle timer after the wait: %w", err)
				}
			}
			l := &lock{b: b, conn: conn, lost: req.Lost, token: g.token, start: start, ident: g.ident, turn: make(chan struct{}, 1),
				key: req.Key, owner: req.Owner, label: req.Label}
			if err := b.announce(ctx, l, req.Value, g.watched); err != nil {
				return nil, err
			}
			b.track(l)
			l.mu.Lock()
			l.startWatch()
			l.mu.Unlock()
			return l, nil
		case rowMissing:
			if err := rollback(ctx, conn.Conn()); err != nil {
				return nil, err
			}
			if _, err := conn.Exec(ctx, "INSERT INTO "+b.n.table+" (key) VALUES ($1) ON CONFLICT DO NOTHING", []byte(req.Key)); err != nil {
				return nil, fmt.Errorf("inserting the key's row: %w", err)
			}
		case belowFloor:
			if g.ident != st.ident {
				b.log.Warn("postgres: the server changed under a pooled connection (a restart or a failover behind a pooler); raising the token floor",
					"started_us", g.ident.start, "replayed_us", g.ident.replayed)
			}
			if err := rollback(ctx, conn.Conn()); err != nil {
				return nil, err
			}
			if st.ident, err = b.raiseFloor(ctx, conn.Conn(), nil); err != nil {
				return nil, err
			}
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("postgres: no lock after %d attempts (rows deleted concurrently?)", attempt)
		}
	}
}

// The statements of an acquisition, sent as one pipelined batch (one round
// trip): the transaction, its local settings, the row lock, and the token —
// taken after the row lock is granted, so tokens follow the grant order.
const (
	beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"
	// The server ends the session, and with it the lock, when the holder
	// stays silent in the transaction for the TTL. lock_timeout and
	// statement_timeout are cleared so that only the caller's context bounds
	// a wait, and transaction_timeout (PostgreSQL 17; the server refuses the
	// name before) so that only the TTL of silence bounds a hold, whatever
	// the role's or database's defaults are.
	settingsSQL = "SELECT set_config('idle_in_transaction_session_timeout', $1, true), " +
		"set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"
	settingsTxTimeoutSQL = settingsSQL + ", set_config('transaction_timeout', '0', true)"
	labelSQL             = "SELECT set_config('application_name', $1, true)"
	// tokenSQL returns the next token and the server's identity, whose
	// floor the token must exceed; it shows the token, the TTL and the label
	// in the holder's application_name ($2 || token || $3), where any
	// session can read them (holderAppName), and tells whether anyone
	// watches the key: a watcher holds advisory lock $4 shared, so taking it
	// exclusively (and giving it back at once) fails.
	tokenSQL = "SELECT n, " + identSQL + ", set_config('application_name', $2 || n || $3, true), " +
		"CASE WHEN pg_try_advisory_lock($4) THEN NOT pg_advisory_unlock($4) ELSE true END FROM nextval($1::regclass) AS n"
	// idleTimeoutSQL restarts the idle timer (any statement does) and sets
	// it to the (possibly new) TTL.
	idleTimeoutSQL = "SELECT set_config('idle_in_transaction_session_timeout', $1, true)"
	// refreshSQL is the statement of Refresh: idleTimeoutSQL, and whether
	// the server is still the one that granted the lock.
	refreshSQL = "SELECT set_config('idle_in_transaction_session_timeout', $1, true), " + identSQL + ", pg_is_in_recovery()"
	// hasTxTimeoutSQL tells whether the server has transaction_timeout.
	hasTxTimeoutSQL = "SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'transaction_timeout')"
)

func (b *backend) lockSQL(try bool) string {
	s := "SELECT 1 FROM " + b.n.table + " WHERE key = $1 FOR UPDATE"
	if try {
		s += " NOWAIT"
	}
	return s
}

// attempt sends one acquisition batch. On success the connection is left in
// the lock transaction; on rowMissing or belowFloor it is in a transaction
// the caller rolls back; on error it is in any state (the caller's Release
// of the connection sorts that out).
func (b *backend) attempt(ctx context.Context, conn *pgx.Conn, req *driver.Request, try bool, st *connState) (outcome, grant, error) {
	batch := &pgx.Batch{}
	batch.Queue(beginSQL)
	if st.txTimeout {
		batch.Queue(settingsTxTimeoutSQL, millis(req.TTL))
	} else {
		batch.Queue(settingsSQL, millis(req.TTL))
	}
	if req.Label != "" {
		batch.Queue(labelSQL, "locker "+req.Label)
	}
	batch.Queue(b.lockSQL(try), []byte(req.Key))
	suffix, _ := holderAppName(req.TTL, req.Label)
	batch.Queue(tokenSQL, b.n.sequence, appPrefix, suffix, b.watchLock(req.Key))

	// A waiting Acquire is cancelled by a cancel request, not by pgx's
	// context handling: that closes the connection, but a backend waiting
	// for a row lock does not read its socket, so it would stay in the lock
	// queue, and be granted the lock (only to die) before the next waiter.
	// The batch runs on a context of its own, and the server's answer to
	// the cancel (SQLSTATE 57014) confirms the backend left the queue
	// before Acquire returns. If the server does not answer within
	// cancelTimeout, the connection is dropped after all.
	bctx := ctx
	if !try {
		var bcancel context.CancelFunc
		bctx, bcancel = context.WithCancel(context.WithoutCancel(ctx))
		defer bcancel()
		batchDone, fired := make(chan struct{}), make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(fired)
			cctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			defer cancel()
			if err := conn.PgConn().CancelRequest(cctx); err == nil {
				select {
				case <-batchDone:
					return
				case <-cctx.Done():
				}
			}
			bcancel()
		})
		defer func() {
			close(batchDone)
			if !stop() {
				<-fired
			}
		}()
	}

	br := conn.SendBatch(bctx, batch)
	out, g, err := readAcquire(br, req.Label != "", st.ident)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if ctx.Err() != nil {
		// Cancelled (the server's 57014 says no more than that), or granted
		// as the context ended: either way the caller drops the connection,
		// still in the transaction, which frees any lock it got.
		err = ctx.Err()
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if try && errors.As(err, &pgErr) && pgErr.Code == codeLockNotAvailable {
			if rerr := rollback(ctx, conn); rerr != nil {
				return 0, grant{}, rerr
			}
			return 0, grant{}, locker.ErrLocked
		}
		return 0, grant{}, err
	}
	return out, g, nil
}

// grant is what an acquisition batch learnt.
type grant struct {
	token   uint64
	ident   serverIdent // the server's identity
	watched bool        // someone watches the key
}

// readAcquire reads the results of an acquisition batch. checked is the
// server identity under which the connection last checked the token floor.
func readAcquire(br pgx.BatchResults, label bool, checked serverIdent) (outcome, grant, error) {
	var g grant
	if _, err := br.Exec(); err != nil {
		return 0, g, fmt.Errorf("begin: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return 0, g, fmt.Errorf("setting the timeouts: %w", err)
	}
	if label {
		if _, err := br.Exec(); err != nil {
			return 0, g, fmt.Errorf("setting application_name: %w", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, g, fmt.Errorf("locking the row: %w", err)
	}
	var n int64
	if err := br.QueryRow().Scan(&n, &g.ident.start, &g.ident.replayed, nil, &g.watched); err != nil {
		return 0, g, fmt.Errorf("taking the token: %w", err)
	}
	switch {
	case tag.RowsAffected() == 0:
		return rowMissing, g, nil
	case n <= g.ident.floor() || g.ident != checked:
		// Below this server life's floor, or on another server life than
		// the floor was checked under (a pooler's connection that survived
		// a restart or a failover): raise the floor first.
		return belowFloor, g, nil
	}
	g.token = uint64(n)
	return granted, g, nil
}

func rollback(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// ensureSchema creates the lock table and sequence once per backend, unless
// configured not to.
func (b *backend) ensureSchema(ctx context.Context, conn *pgx.Conn) error {
	if b.skipDDL {
		return nil
	}
	return b.schema.do(ctx, func() error {
		return createObjects(ctx, conn, b.n.schema, b.n.ddl, recordColumns, b.n.table, b.n.sequence)
	})
}

// raiseFloorSQL moves the token sequence up to the server clock in
// microseconds if it is below, under an advisory lock so that concurrent
// raises cannot interleave: the sequence only ever moves up.
func (b *backend) raiseFloorSQL() string {
	return "SELECT setval($1::regclass, f) FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS f) AS now " +
		"WHERE f > (SELECT last_value FROM " + b.n.sequence + ")"
}

// raiseFloor raises the token floor and returns the server identity it was
// raised under. With st (a connection's first use), it also learns which
// settings the server has, in the same round trip.
func (b *backend) raiseFloor(ctx context.Context, conn *pgx.Conn, st *connState) (serverIdent, error) {
	var id serverIdent
	batch := &pgx.Batch{}
	if st != nil {
		batch.Queue(hasTxTimeoutSQL).QueryRow(func(r pgx.Row) error { return r.Scan(&st.txTimeout) })
	}
	batch.Queue("BEGIN")
	// The raise need not survive a crash: after one, the next connection
	// raises the sequence again, to a later clock. So no WAL flush.
	batch.Queue("SET LOCAL synchronous_commit = off")
	batch.Queue("SELECT pg_advisory_xact_lock($1)", schemaLockKey+1)
	batch.Queue(b.raiseFloorSQL(), b.n.sequence)
	batch.Queue("SELECT " + identSQL).QueryRow(func(r pgx.Row) error { return r.Scan(&id.start, &id.replayed) })
	batch.Queue("COMMIT")
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return id, fmt.Errorf("raising the token floor: %w", err)
	}
	return id, nil
}

// firstUse learns what the backend needs to know of a new connection and
// checks the token floor, in one round trip.
func (b *backend) firstUse(ctx context.Context, conn *pgx.Conn) (*connState, error) {
	st := &connState{}
	id, err := b.raiseFloor(ctx, conn, st)
	if err != nil {
		return nil, err
	}
	st.ident = id
	return st, nil
}
