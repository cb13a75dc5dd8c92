package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// describeSQL describes the lock rows that match where (parameters from $3),
// in key order, at most $2 of them, without locking anything: a row is held
// when its xmax is a running transaction (whose own lock on its id, in
// pg_locks, is granted) — the transaction that locked it FOR UPDATE; the
// holder's session (pg_stat_activity) shows the token, the TTL and the
// label (holderAppName), whether it is idle, since when, and when its
// transaction began; the holder record counts if its token is the holder's.
// Waiters are the ungranted entries of pg_locks that wait for the holder's
// transaction (the first in the queue) or for the row's tuple lock (the
// others). A lock whose holder record's minimum hold lasts is held by that
// record's holder (it may have released it, or died). $1 is the table, for
// its oid.
func (b *backend) describeSQL(where string) string {
	return "WITH locks AS MATERIALIZED (SELECT locktype, database, relation, page, tuple, transactionid, pid, mode, granted " +
		"FROM pg_locks WHERE locktype IN ('transactionid', 'tuple')), " +
		"r AS (SELECT key, xmax, permits, (ctid::text::point)[0]::int AS page, (ctid::text::point)[1]::int AS tup FROM " + b.n.table +
		" WHERE " + where + " ORDER BY key LIMIT $2) " +
		"SELECT r.key, h.pid IS NOT NULL, a.application_name, a.state, " +
		"(extract(epoch FROM clock_timestamp() - a.state_change) * 1000)::bigint, a.xact_start, rec.token, rec.label, rec.value, " +
		"(SELECT count(*) FROM locks w WHERE NOT w.granted AND (" +
		"(h.pid IS NOT NULL AND w.locktype = 'transactionid' AND w.transactionid = r.xmax) OR " +
		"(w.locktype = 'tuple' AND w.database = (SELECT oid FROM pg_database WHERE datname = current_database()) " +
		"AND w.relation = $1::regclass AND w.page = r.page AND w.tuple = r.tup))), " +
		"r.permits, (extract(epoch FROM rec.held_until - clock_timestamp()) * 1000)::bigint " +
		"FROM r LEFT JOIN LATERAL (SELECT l.pid FROM locks l WHERE l.locktype = 'transactionid' AND l.transactionid = r.xmax " +
		"AND l.granted AND l.mode = 'ExclusiveLock' LIMIT 1) AS h ON true " +
		"LEFT JOIN pg_stat_activity AS a ON a.pid = h.pid " +
		"LEFT JOIN " + b.n.table + " AS rec ON rec.key = decode('ff', 'hex') || r.key " +
		"ORDER BY r.key"
}

// described is one lock as describeSQL shows it; ttl is the holder's full
// TTL (0 if unknown), which bounds its life from now when info.TTL is
// unknown.
type described struct {
	info    driver.LockInfo
	ttl     time.Duration
	permits int // the limit of an N-permit key, else 0 or 1
	// unannounced: the holder's grant writes a holder record (its value,
	// a label too long for application_name, a minimum hold) that is not
	// committed yet — the grant has not been handed out.
	unannounced bool
}

// describe runs describeSQL on q.
func (b *backend) describe(ctx context.Context, q *pgx.Conn, where string, limit int, args ...any) ([]described, error) {
	rows, err := q.Query(ctx, b.describeSQL(where), append([]any{b.n.table, limit}, args...)...)
	if err != nil {
		return nil, err
	}
	var out []described
	for rows.Next() {
		var (
			key                []byte
			held               bool
			app, state, rlabel *string
			rvalue             *string
			idleMS, rtoken     *int64
			xactStart          *time.Time
			waiters            int64
			permits            *int32
			heldMS             *int64
		)
		if err := rows.Scan(&key, &held, &app, &state, &idleMS, &xactStart, &rtoken, &rlabel, &rvalue, &waiters, &permits, &heldMS); err != nil {
			rows.Close()
			return nil, err
		}
		d := described{info: driver.LockInfo{Key: string(key), Held: held, Waiters: int(waiters)}}
		if permits != nil {
			d.permits = int(*permits)
		}
		if held {
			d.info.TTL = -1
			if xactStart != nil {
				// The lock transaction's start: the grant for a TryAcquire,
				// the start of the wait for an Acquire that waited.
				d.info.Granted = *xactStart
			}
			h, ok := holderApp{}, false
			if app != nil {
				h, ok = parseHolderApp(*app)
			}
			if ok {
				d.ttl = h.ttl
				d.info.Token, d.info.Label = h.token, h.label
				d.unannounced = h.recorded && (rtoken == nil || uint64(*rtoken) != h.token)
				if rtoken != nil && uint64(*rtoken) == h.token {
					if rlabel != nil {
						d.info.Label = *rlabel
					}
					if rvalue != nil {
						d.info.Value = *rvalue
					}
				}
				switch {
				case state == nil:
					// Another role's session without pg_read_all_stats: the
					// time left is unknown.
				case *state == "idle in transaction" && idleMS != nil:
					d.info.TTL = max(0, h.ttl-time.Duration(*idleMS)*time.Millisecond)
				default:
					// Running a statement (a refresh): the idle timer stands.
					d.info.TTL = h.ttl
				}
			}
		}
		if heldMS != nil && *heldMS > 0 && rtoken != nil && (!held || uint64(*rtoken) != d.info.Token) {
			// Held by a minimum hold, whoever holds the row: the record's
			// holder, until it ends.
			d.info = driver.LockInfo{Key: d.info.Key, Held: true, Token: uint64(*rtoken), TTL: time.Duration(*heldMS) * time.Millisecond,
				Waiters: d.info.Waiters}
			if rlabel != nil {
				d.info.Label = *rlabel
			}
			if rvalue != nil {
				d.info.Value = *rvalue
			}
		}
		out = append(out, d)
	}
	rows.Close()
	return out, rows.Err()
}

// inspectOn describes key, with one statement on conn.
func (b *backend) inspectOn(ctx context.Context, conn *pgx.Conn, key string) (described, error) {
	ds, err := b.describe(ctx, conn, "key = $3", 1, []byte(key))
	if err != nil {
		return described{}, fmt.Errorf("postgres: inspect: %w", err)
	}
	if len(ds) == 0 {
		return described{info: driver.LockInfo{Key: key}}, nil
	}
	return b.permitted(ctx, conn, ds[0])
}

// permitted describes an N-permit key by its permits, if any is held (else
// by its lock row, which a lock may hold): as the holder, the one with the
// lowest token (the earliest granted); as waiters, the Acquires in the
// key's queue.
func (b *backend) permitted(ctx context.Context, conn *pgx.Conn, d described) (described, error) {
	if d.permits <= 1 {
		return d, nil
	}
	ps, err := b.describe(ctx, conn, "key = ANY("+permitRowsSQL("$3", "$4")+")", d.permits, []byte(d.info.Key), int32(d.permits))
	if err != nil {
		return d, err
	}
	var first *described
	for i, p := range ps {
		if p.info.Held && (first == nil || p.info.Token < first.info.Token) {
			first = &ps[i]
		}
	}
	if first == nil {
		return d, nil
	}
	q := uint64(b.queueLock(d.info.Key))
	var waiters int64
	// Every holder of the queue lock or waiter for it waits for a permit
	// (the first in the queue holds it until it has one).
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' "+
		"AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "+
		"AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1", int64(q>>32), int64(q&0xffffffff)).Scan(&waiters)
	if err != nil {
		return d, err
	}
	out := *first
	out.info.Key, out.info.Waiters, out.permits = d.info.Key, int(waiters), d.permits
	return out, nil
}

// withConn runs f on a pool connection, once the schema is there.
func (b *backend) withConn(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: getting a pool connection: %w", err)
	}
	defer conn.Release()
	if err := b.ensureSchema(ctx, conn.Conn()); err != nil {
		return err
	}
	return f(conn.Conn())
}

// Inspect implements driver.Inspector from the catalog: it never locks.
//
// A holder whose record is still being written (its grant's value, say) is
// read again until the record is there, for up to announceWait: the
// record is committed by the holder's Locker right after the grant, before
// the grant is handed out, and a value must show with its grant (an
// election's observers see a leader with the value it campaigned with).
// Past announceWait (a holder whose Locker stopped between the two), the
// holder is shown as it is.
func (b *backend) Inspect(ctx context.Context, key string) (_ driver.LockInfo, err error) {
	defer authz(&err)
	var d described
	err = b.withConn(ctx, func(conn *pgx.Conn) error {
		pause, end := time.Millisecond, time.Now().Add(announceWait)
		for {
			var err error
			if d, err = b.inspectOn(ctx, conn, key); err != nil || !d.unannounced || time.Now().After(end) {
				return err
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return ctx.Err()
			}
			pause = min(2*pause, 50*time.Millisecond)
		}
	})
	return d.info, err
}

// announceWait bounds how long Inspect waits for a new holder's record.
const announceWait = 2 * time.Second

// List implements driver.Inspector in key order, by keyset: the cursor is
// the last key read, in hex. One call reads at most limit lock rows, held
// or not.
func (b *backend) List(ctx context.Context, prefix, cursor string, limit int) (_ []driver.LockInfo, _ string, err error) {
	defer authz(&err)
	after, err := hex.DecodeString(cursor)
	if err != nil {
		return nil, "", fmt.Errorf("%w: postgres: list cursor %q", locker.ErrInvalidOption, cursor)
	}
	var ds []described
	err = b.withConn(ctx, func(conn *pgx.Conn) error {
		ds, err = b.describe(ctx, conn, "key > $3 AND key >= $4 AND key < $5", limit,
			append([]byte{}, after...), append([]byte{}, prefix...), upperBound(prefix))
		for i := range ds {
			if err == nil {
				ds[i], err = b.permitted(ctx, conn, ds[i])
			}
		}
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list: %w", err)
	}
	var held []driver.LockInfo
	for _, d := range ds {
		if d.info.Held {
			held = append(held, d.info)
		}
	}
	next := ""
	if len(ds) == limit && limit > 0 {
		next = hex.EncodeToString([]byte(ds[len(ds)-1].info.Key))
	}
	return held, next, nil
}

// upperBound returns the least byte string above every key that starts
// with prefix, and at most 0xfe, where permit rows begin (and holder
// records after them, at 0xff).
func upperBound(prefix string) []byte {
	b := []byte(prefix)
	for len(b) > 0 {
		if last := len(b) - 1; b[last] < 0xff {
			b[last]++
			if b[0] < 0xfe {
				return b
			}
			break
		}
		b = b[:len(b)-1]
	}
	return []byte{0xfe}
}
