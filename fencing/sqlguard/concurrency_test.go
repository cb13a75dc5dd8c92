package sqlguard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/fencing/sqlguard"
)

// writeFunc is one way of running a fenced write: Guard.Write, or AdmitTx
// in a transaction of the caller's at some isolation level.
type writeFunc func(ctx context.Context, g *sqlguard.Guard, token uint64, fn func(*sql.Tx) error) error

func viaWrite(ctx context.Context, g *sqlguard.Guard, token uint64, fn func(*sql.Tx) error) error {
	return g.Write(ctx, "counter", token, fn)
}

func viaAdmitTx(db *sql.DB, level sql.IsolationLevel) writeFunc {
	return func(ctx context.Context, g *sqlguard.Guard, token uint64, fn func(*sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck
		if err := g.AdmitTx(ctx, tx, "counter", token); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit()
	}
}

// TestGuard_ConcurrentWriters_CommitInTokenOrder: writers racing with
// interleaved tokens on one resource, each incrementing a counter by a read
// then a write (not atomic by itself) and logging its token under the new
// value. The fence must serialize them: the counter equals the number of
// writes that returned nil (no lost update), and the tokens in commit order
// never decrease (no lower token passed after a higher one).
func TestGuard_ConcurrentWriters_CommitInTokenOrder(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e engine, db *sql.DB) {
		ways := map[string]writeFunc{"Write": viaWrite, "AdmitTx": viaAdmitTx(db, sql.LevelDefault)}
		if e.name == "postgres" {
			ways["AdmitTx/RepeatableRead"] = viaAdmitTx(db, sql.LevelRepeatableRead)
			ways["AdmitTx/Serializable"] = viaAdmitTx(db, sql.LevelSerializable)
		}
		for name, write := range ways {
			t.Run(name, func(t *testing.T) { concurrentWriters(t, db, write) })
		}
	})
}

func concurrentWriters(t *testing.T, db *sql.DB, write writeFunc) {
	exec(t, db, "DROP TABLE IF EXISTS counter", "DROP TABLE IF EXISTS log", "DROP TABLE IF EXISTS locker_fences",
		"CREATE TABLE counter (id integer PRIMARY KEY, n integer NOT NULL)",
		"INSERT INTO counter VALUES (1, 0)",
		"CREATE TABLE log (seq integer NOT NULL, token bigint NOT NULL)")
	g, err := sqlguard.New(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	const writers, each = 6, 20
	var (
		mu                 sync.Mutex
		admitted, refused  int
		serialization, bad []error
		wg                 sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				token := uint64(j*writers + w + 1)
				err := write(ctx, g, token, func(tx *sql.Tx) error {
					var n int
					if err := tx.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE counter SET n = %d WHERE id = 1", n+1)); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO log (seq, token) VALUES (%d, %d)", n+1, token))
					return err
				})
				var pgErr *pgconn.PgError
				mu.Lock()
				switch {
				case err == nil:
					admitted++
				case errors.Is(err, fencing.ErrStaleToken):
					refused++
				case errors.As(err, &pgErr) && pgErr.Code == "40001":
					// REPEATABLE READ and SERIALIZABLE: a writer that
					// waited must retry; it did not pass.
					serialization = append(serialization, err)
				default:
					bad = append(bad, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d writes failed, first: %v", len(bad), bad[0])
	}
	t.Logf("%d admitted, %d refused as stale, %d serialization failures", admitted, refused, len(serialization))
	var n int
	if err := db.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != admitted {
		t.Errorf("counter = %d after %d admitted writes: updates were lost", n, admitted)
	}
	rows, err := db.QueryContext(ctx, "SELECT seq, token FROM log ORDER BY seq, token")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last struct{ seq, token int64 }
	for rows.Next() {
		var seq, token int64
		if err := rows.Scan(&seq, &token); err != nil {
			t.Fatal(err)
		}
		if seq != last.seq+1 || token < last.token {
			t.Fatalf("log: write %d with token %d after write %d with token %d: want consecutive writes, tokens not decreasing",
				seq, token, last.seq, last.token)
		}
		last.seq, last.token = seq, token
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if last.seq != int64(admitted) {
		t.Errorf("log has %d writes, want %d", last.seq, admitted)
	}
}
