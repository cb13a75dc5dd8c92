package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// publishSQL writes the holder record of a lock if, and only if, the lock
// is held by the session that shows the lock's token (the holder's own
// transaction cannot commit anything), and notifies. It returns how many
// records it wrote.
func (b *backend) publishSQL() string {
	return "WITH h AS (SELECT 1 FROM " + b.n.table + " AS r " +
		"JOIN pg_locks AS l ON l.locktype = 'transactionid' AND l.transactionid = r.xmax AND l.granted AND l.mode = 'ExclusiveLock' " +
		"JOIN pg_stat_activity AS a ON a.pid = l.pid " +
		"WHERE r.key = $3 AND starts_with(a.application_name, $4)), " +
		"up AS (INSERT INTO " + b.n.table + " AS t (key, owner, token, label, value) SELECT $5, $6, $7, $8, $9 FROM h LIMIT 1 " +
		"ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, label = excluded.label, value = excluded.value " +
		"WHERE t.token IS NULL OR t.token <= excluded.token RETURNING 1) " +
		"SELECT (SELECT count(*) FROM up), set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"
}

// Publish implements driver.Publisher: the value goes to the lock's holder
// record, written by another pool connection on the condition that the
// lock's own session still holds the row.
func (b *backend) Publish(ctx context.Context, dl driver.Lock, value string) (err error) {
	defer authz(&err)
	l, ok := dl.(*lock)
	if !ok {
		return fmt.Errorf("postgres: publish: a lock of another backend (%T)", dl)
	}
	if err := l.held(); err != nil {
		return err
	}
	var n int64
	token := strconv.FormatUint(l.token, 10)
	err = b.pool.QueryRow(ctx, b.publishSQL(), b.n.channel, payload(l.key), []byte(l.row), appPrefix+token+" ",
		recordKey(l.row), l.owner[:], int64(l.token), l.recordLabel(), value).Scan(&n, nil, nil)
	if err != nil {
		return fmt.Errorf("postgres: publish: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: postgres: publish: the lock is no longer held by its session", locker.ErrLeaseLost)
	}
	return nil
}
