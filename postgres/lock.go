package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// lock is one held lock: a pool connection pinned in the open transaction
// that holds the key's row lock. While nobody uses the connection, a watcher
// goroutine reads it, so that a session the server ends (idle timeout,
// pg_terminate_backend, shutdown) or a connection that breaks is reported at
// once through the request's Lost callback instead of at the next refresh.
type lock struct {
	b     *backend
	lost  func(error)
	token uint64
	start time.Time
	ident serverIdent // the server's identity at the grant
	key   string
	row   string // the row it holds locked: key, or a permit's row
	owner driver.OwnerID
	label string
	// listened: the connection LISTENs since the permit's wait, which the
	// lock transaction cannot undo (UNLISTEN takes effect at commit).
	listened bool
	minHold  time.Duration

	// turn is held by whoever runs a statement on conn (Refresh, Release)
	// or drops it (abandon), so that Close never drops the connection under
	// a statement in flight: it cancels that statement and waits for it.
	turn chan struct{}

	mu       sync.Mutex
	conn     *pgxpool.Conn // nil once the lock has ended
	cause    error         // why it ended without Release
	watch    *watcher
	closing  bool               // abandon has begun: no new statement starts
	cancelOp context.CancelFunc // cancels the statement in flight, if any
}

type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *lock) Token() uint64    { return l.token }
func (l *lock) Start() time.Time { return l.start }

// startWatch starts the watcher; l.mu is held and l.conn is set.
func (l *lock) startWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	l.watch = w
	pg := l.conn.Conn().PgConn()
	go func() {
		defer close(w.done)
		for {
			// Nothing is expected on an idle connection: any message read
			// is the server ending the session, any error a broken
			// connection. A cancelled ctx makes it return a timeout, after
			// which pgconn leaves the connection usable.
			err := pg.WaitForNotification(ctx)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				continue // a NOTIFY for a LISTEN of the pool's owner
			}
			cause := fmt.Errorf("postgres: lock session ended: %w", err)
			// The root logs the loss with its cause; this says which way.
			l.b.log.Debug("postgres: the session holding a lock ended", "err", err)
			if l.end(cause) {
				l.lost(cause)
			}
			return
		}
	}()
}

// held returns nil while the lock's connection is pinned, else
// ErrLeaseLost with why it ended.
func (l *lock) held() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldLocked()
}

func (l *lock) heldLocked() error {
	if l.conn != nil {
		return nil
	}
	if l.cause == nil {
		return locker.ErrLeaseLost
	}
	return fmt.Errorf("%w: %w", locker.ErrLeaseLost, l.cause)
}

// pause stops the watcher and returns the connection for one statement, or
// ErrLeaseLost if the lock has ended.
func (l *lock) pause() (*pgxpool.Conn, error) {
	l.mu.Lock()
	w := l.watch
	l.watch = nil
	l.mu.Unlock()
	if w != nil {
		w.cancel()
		<-w.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.heldLocked(); err != nil {
		return nil, err
	}
	return l.conn, nil
}

func (l *lock) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil && l.watch == nil {
		l.startWatch()
	}
}

// end drops the connection — destroying it if it is still in the lock
// transaction, which ends that transaction on the server — and reports
// whether this call ended the lock. The watcher must not be using the
// connection (it is either stopped or the caller).
func (l *lock) end(cause error) bool {
	l.mu.Lock()
	conn := l.conn
	if conn == nil {
		l.mu.Unlock()
		return false
	}
	l.conn, l.cause = nil, cause
	l.mu.Unlock()
	conn.Release()
	l.b.untrack(l)
	l.b.freeSlot()
	return true
}

// begin waits for the turn to run a statement on the connection and
// returns the context to run it with, which abandon may cancel; done ends
// the turn.
func (l *lock) begin(ctx context.Context) (_ context.Context, done func(), _ error) {
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		<-l.turn
		return nil, nil, fmt.Errorf("%w: %w", locker.ErrLeaseLost, errClosing)
	}
	ctx, cancel := context.WithCancel(ctx)
	l.cancelOp = cancel
	l.mu.Unlock()
	return ctx, func() {
		l.mu.Lock()
		l.cancelOp = nil
		l.mu.Unlock()
		cancel()
		<-l.turn
	}, nil
}

var errClosing = errors.New("postgres: locker closed")

// abandon ends the lock without a round trip (Backend.Close): it cancels a
// statement in flight, waits for it to return, and drops the connection.
func (l *lock) abandon() {
	l.mu.Lock()
	l.closing = true
	if l.cancelOp != nil {
		l.cancelOp()
	}
	l.mu.Unlock()
	l.turn <- struct{}{}
	defer func() { <-l.turn }()
	if _, err := l.pause(); err == nil {
		l.end(errClosing)
	}
}

// Refresh restarts the server's idle timer, set to ttl, with one statement
// on the pinned connection. Any failure ends the lock: the connection is
// dropped, so the server frees the row at once (or, if it cannot be reached,
// when its idle timer fires), and the holder is told ErrLeaseLost.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer authz(&err)
	ctx, done, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	conn, err := l.pause()
	if err != nil {
		return err
	}
	var id serverIdent
	var recovering bool
	err = conn.QueryRow(ctx, refreshSQL, millis(ttl)).Scan(nil, &id.start, &id.replayed, &recovering)
	switch {
	case err != nil:
		err = fmt.Errorf("postgres: refresh: %w", err)
	case recovering:
		err = errors.New("postgres: refresh: the server is in recovery (a standby): the lock cannot be held there")
	case id != l.ident:
		err = fmt.Errorf("postgres: refresh: the server is not the one that granted the lock (started at %d µs, replayed until %d µs; at the grant %d, %d): a failover or restart behind a pooler",
			id.start, id.replayed, l.ident.start, l.ident.replayed)
	}
	if err != nil {
		l.end(err)
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	}
	l.resume()
	return nil
}

// Release rolls the lock transaction back — it wrote nothing worth a commit,
// and a rollback waits for no WAL flush — and returns the connection to the
// pool. A rollback that succeeds proves the transaction, and so the row
// lock, was still ours; one that fails leaves it unknown whether the server
// had already ended it, so the caller is told ErrLeaseLost.
func (l *lock) Release(ctx context.Context) (err error) {
	defer authz(&err)
	ctx, done, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	conn, err := l.pause()
	if err != nil {
		return err
	}
	// In the same round trip, once the row is free, the release is
	// notified if anyone watches the key.
	batch := &pgx.Batch{}
	batch.Queue("ROLLBACK")
	batch.Queue(releaseNotifySQL, l.b.n.channel, payload(l.key), l.b.watchLock(l.key))
	if l.listened {
		queueUnlisten(batch, conn.Conn())
	}
	br := conn.SendBatch(ctx, batch)
	_, err = br.Exec()
	if err == nil {
		if _, err := br.Exec(); err != nil {
			// Released all the same; watchers see it at the holder's TTL.
			l.b.log.Warn("postgres: notifying a release", "err", err)
		}
	}
	var unlisten error
	for i := 2; err == nil && unlisten == nil && i < batch.Len(); i++ {
		_, unlisten = br.Exec()
	}
	_ = br.Close() // any error was the ROLLBACK's or the notification's
	if unlisten != nil {
		// Released, but the connection must not go back to the pool still
		// listening: end closes a closed connection for good.
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Conn().Close(cctx)
		cancel()
	}
	if err != nil {
		cause := fmt.Errorf("postgres: release: %w", err)
		l.end(cause)
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, cause)
	}
	l.end(errReleased)
	return nil
}

// releaseNotifySQL notifies the release of a key ($2) on channel $1, if a
// watch holds its advisory lock ($3; see tokenSQL), without a WAL flush.
const releaseNotifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2) " +
	"WHERE NOT pg_try_advisory_xact_lock($3)"

var errReleased = errors.New("postgres: released")
