package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
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
	// idleSession: the server has idle_session_timeout (PostgreSQL 14 and
	// later), which bounds a permit's wait outside a transaction.
	idleSession bool
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
	minHeld            // the row is locked, but a released holder's minimum hold lasts
)

// acquire pins a pool connection and takes req.Key on it; the caller holds a
// slot, which is handed over to the lock or freed.
func (b *backend) acquire(ctx context.Context, req *driver.Request, try bool) (driver.Lock, error) {
	l, err := onLiveConn(ctx, b, func() (*lock, error) {
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting a pool connection: %w", err)
		}
		l, err := b.lockOn(ctx, conn, req, try)
		if err != nil {
			err = endedOr(conn.Conn(), err)
			if req.Limit > 1 {
				cleanPermitConn(conn)
			}
			// Idle connections go back to the pool; closed ones, and ones
			// left in a transaction, are destroyed, which ends the
			// transaction on the server (pgxpool.Conn.Release).
			conn.Release()
			return nil, err
		}
		return l, nil
	})
	if err != nil {
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
		var (
			out outcome
			g   grant
			err error
		)
		if req.Limit > 1 {
			out, g, err = b.attemptPermit(ctx, conn.Conn(), req, try, st)
		} else {
			out, g, err = b.attempt(ctx, conn.Conn(), req, try, st)
		}
		if err == nil && out == minHeld {
			out, g, err = b.awaitMinHold(ctx, conn.Conn(), req, try, st)
		}
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
				key: req.Key, row: req.Key, owner: req.Owner, label: req.Label, listened: g.listened, minHold: req.MinHold}
			if g.row != nil {
				l.row = string(g.row)
			}
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
	// idleTimeoutSQL restarts the idle timer (any statement does) and sets
	// it to the (possibly new) TTL.
	idleTimeoutSQL = "SELECT set_config('idle_in_transaction_session_timeout', $1, true)"
	// refreshSQL is the statement of Refresh: idleTimeoutSQL, and whether
	// the server is still the one that granted the lock.
	refreshSQL = "SELECT set_config('idle_in_transaction_session_timeout', $1, true), " + identSQL + ", pg_is_in_recovery()"
	// hasSettingsSQL tells whether the server has transaction_timeout and
	// idle_session_timeout.
	hasSettingsSQL = "SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'transaction_timeout'), " +
		"EXISTS (SELECT 1 FROM pg_settings WHERE name = 'idle_session_timeout')"
)

// tokenSQL returns the next token and the server's identity, whose floor
// the token must exceed; it shows the token, the TTL and the label in the
// holder's application_name ($2 || token || $3), where any session can read
// them (holderAppName); it tells whether anyone watches the key (a watcher
// holds advisory lock $4 shared, so taking it exclusively, and giving it
// back at once, fails), and whether the minimum hold of an earlier holder
// (in holder record $5) lasts: a statement of its own after the row lock,
// so that it sees what that holder committed before it let the row go.
func (b *backend) tokenSQL() string {
	return "SELECT n, " + identSQL + ", set_config('application_name', $2 || n || $3, true), " +
		"CASE WHEN pg_try_advisory_lock($4) THEN NOT pg_advisory_unlock($4) ELSE true END, " +
		"coalesce((SELECT held_until > clock_timestamp() FROM " + b.n.table + " WHERE key = $5), false) " +
		"FROM nextval($1::regclass) AS n"
}

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
	batch := queueBegin(req, st)
	batch.Queue(b.lockSQL(try), []byte(req.Key))
	b.queueToken(batch, req, req.Key)

	var (
		out outcome
		g   grant
	)
	err := waitOn(ctx, conn, !try, func(bctx context.Context) error {
		br := conn.SendBatch(bctx, batch)
		var err error
		out, g, err = readAcquire(br, req.Label != "", st.ident)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		if try && isLockNotAvailable(err) {
			return 0, grant{}, b.lockedOrMismatch(ctx, conn, req.Key)
		}
		return 0, grant{}, err
	}
	return out, g, nil
}

// queueBegin returns a batch that begins a lock transaction.
func queueBegin(req *driver.Request, st *connState) *pgx.Batch {
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
	return batch
}

// queueToken queues tokenSQL for a holder of row.
func (b *backend) queueToken(batch *pgx.Batch, req *driver.Request, row string) *pgx.QueuedQuery {
	suffix, _ := holderAppName(req.TTL, req.Label, req.Value != "" || req.MinHold > 0)
	return batch.Queue(b.tokenSQL(), b.n.sequence, appPrefix, suffix, b.watchLock(req.Key), recordKey(row))
}

func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeLockNotAvailable
}

// waitOn runs f, which sends statements on conn, with ctx. With wait (a
// statement that waits in PostgreSQL's lock queue, or any statement of a
// session holding its place in a key's queue), it is cancelled by a
// cancel request, not by pgx's context handling: that closes the
// connection, but a backend waiting for a lock does not read its socket, so
// it would stay in the lock queue, and be granted the lock (only to die)
// before the next waiter. f runs on a context of its own, and the server's
// answer to the cancel (SQLSTATE 57014) confirms the backend left the queue
// before waitOn returns. If the server does not answer within
// cancelTimeout, the connection is dropped after all. Once ctx has ended,
// waitOn returns its error: cancelled, or granted as the context ended,
// either way the caller drops the connection, still in the transaction,
// which frees any lock it got.
func waitOn(ctx context.Context, conn *pgx.Conn, wait bool, f func(context.Context) error) error {
	bctx := ctx
	if wait {
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
	err := f(bctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// lockedOrMismatch tells why a TryAcquire of a lock found key's row locked
// (its transaction is aborted): ErrLocked, or, if the row's holders share
// it (permits of an N-permit lock hold it FOR SHARE), an error wrapping
// locker.ErrInvalidOption. It asks in the round trip that rolls back, so a
// TryAcquire that finds a lock held costs what it did before permits.
func (b *backend) lockedOrMismatch(ctx context.Context, conn *pgx.Conn, key string) error {
	// The simple protocol, as the aborted transaction refuses to prepare a
	// statement; the key goes in hex, which needs no quoting.
	results, err := conn.PgConn().Exec(ctx, "ROLLBACK; BEGIN; SELECT permits FROM "+b.n.table+
		" WHERE key = decode('"+hex.EncodeToString([]byte(key))+"', 'hex') FOR SHARE SKIP LOCKED; ROLLBACK").ReadAll()
	if err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	if len(results) == 4 && len(results[2].Rows) == 1 && results[2].Rows[0][0] != nil {
		if limit, err := strconv.Atoi(string(results[2].Rows[0][0])); err == nil && limit > 1 {
			return limitMismatch(limit, 1)
		}
	}
	return locker.ErrLocked
}

func limitMismatch(stored, asked int) error {
	return fmt.Errorf("%w: postgres: the key admits %d holders at once, this acquisition asks for %d", locker.ErrInvalidOption, stored, asked)
}

// minHoldSQL waits, on the server's clock, for the minimum hold of the
// key's earlier holder (holder record $1) to pass; the row stays locked
// meanwhile, so the waiters behind keep their order.
func (b *backend) minHoldSQL() string {
	return "SELECT pg_sleep(extract(epoch FROM held_until - clock_timestamp())::float8) FROM " + b.n.table +
		" WHERE key = $1 AND held_until > clock_timestamp()"
}

// awaitMinHold follows an attempt that got the row of a lock
// whose earlier holder's minimum hold lasts: TryAcquire gives up with
// ErrLocked; Acquire waits for it to pass, holding the row, and takes a new
// token (tokens follow the order in which locks are really granted).
func (b *backend) awaitMinHold(ctx context.Context, conn *pgx.Conn, req *driver.Request, try bool, st *connState) (outcome, grant, error) {
	if try {
		if err := rollback(ctx, conn); err != nil {
			return 0, grant{}, err
		}
		return 0, grant{}, locker.ErrLocked
	}
	var (
		out outcome
		g   grant
	)
	err := waitOn(ctx, conn, true, func(bctx context.Context) error {
		batch := &pgx.Batch{}
		batch.Queue(b.minHoldSQL(), recordKey(req.Key))
		q := b.queueToken(batch, req, req.Key)
		var err error
		q.QueryRow(func(r pgx.Row) error {
			out, g, err = scanToken(r, st.ident)
			return err
		})
		if cerr := conn.SendBatch(bctx, batch).Close(); cerr != nil {
			return cerr
		}
		return err
	})
	if err != nil {
		return 0, grant{}, err
	}
	if out == minHeld {
		return 0, grant{}, errors.New("postgres: a minimum hold lasted past its end")
	}
	return out, g, nil
}

// grant is what an acquisition batch learnt.
type grant struct {
	token    uint64
	ident    serverIdent // the server's identity
	watched  bool        // someone watches the key
	row      []byte      // a permit's row; nil for a lock
	listened bool        // the connection LISTENs (a permit's wait)
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
	out, g, err := scanToken(br.QueryRow(), checked)
	if err != nil {
		return 0, g, err
	}
	if tag.RowsAffected() == 0 {
		return rowMissing, g, nil
	}
	return out, g, nil
}

// scanToken reads a row of tokenSQL.
func scanToken(r pgx.Row, checked serverIdent) (outcome, grant, error) {
	var (
		g    grant
		n    int64
		held bool
	)
	if err := r.Scan(&n, &g.ident.start, &g.ident.replayed, nil, &g.watched, &held); err != nil {
		return 0, g, fmt.Errorf("taking the token: %w", err)
	}
	switch {
	case n <= g.ident.floor() || g.ident != checked:
		// Below this server life's floor, or on another server life than
		// the floor was checked under (a pooler's connection that survived
		// a restart or a failover): raise the floor first.
		return belowFloor, g, nil
	case held:
		return minHeld, g, nil
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

// ensureSchema creates the lock table and sequence once per backend or, with
// WithSkipSchemaCreation, checks once that they exist and may be used.
func (b *backend) ensureSchema(ctx context.Context, conn *pgx.Conn) error {
	return b.schema.do(ctx, func() error {
		if b.skipDDL {
			return checkObjects(ctx, conn, b.n)
		}
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
		batch.Queue(hasSettingsSQL).QueryRow(func(r pgx.Row) error { return r.Scan(&st.txTimeout, &st.idleSession) })
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
