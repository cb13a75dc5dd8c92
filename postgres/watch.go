package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Watch implements driver.Watcher with LISTEN on the table's channel, on a
// connection of its own that takes one connection of the budget for as
// long as the watch lasts (ErrPoolExhausted, like TryAcquire, when none is
// left). Grants, releases and publications are notified (payload: a hash
// of the key). A lock that ends otherwise — its session timed out, killed
// or cut off — is notified by nobody: the watch arms a timer at the time
// the holder has left (Inspect's TTL, or its whole TTL where the holder's
// idle time is hidden from this role) and looks again when it fires.
func (b *backend) Watch(ctx context.Context, key string) (_ <-chan struct{}, err error) {
	defer authz(&err)
	if err := b.trySlot(ctx); err != nil {
		return nil, err
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		b.freeSlot()
		return nil, fmt.Errorf("postgres: getting a pool connection: %w", err)
	}
	last, err := b.listen(ctx, conn.Conn(), key)
	if err != nil {
		// The session keeps a LISTEN and a name: do not pool it.
		closeConn(conn)
		b.freeSlot()
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watch{b: b, conn: conn, key: key, cancel: cancel, ch: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cancel()
		closeConn(conn)
		b.freeSlot()
		return nil, errClosing
	}
	b.watches[w] = struct{}{}
	b.mu.Unlock()
	go w.run(wctx, last)
	return w.ch, nil
}

// listen takes the key's watch lock (grants and releases notify only while
// one is held), listens, and describes key: the state the watch starts
// from.
func (b *backend) listen(ctx context.Context, conn *pgx.Conn, key string) (described, error) {
	if err := b.ensureSchema(ctx, conn); err != nil {
		return described{}, err
	}
	batch := &pgx.Batch{}
	batch.Queue("SELECT set_config('application_name', $1, false)", b.watcherAppName())
	batch.Queue("SELECT pg_advisory_lock_shared($1)", b.watchLock(key))
	batch.Queue("LISTEN " + pgx.Identifier{b.n.channel}.Sanitize())
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return described{}, fmt.Errorf("postgres: watch: %w", err)
	}
	return b.inspectOn(ctx, conn, key)
}

// closeConn drops a pool connection rather than return it to the pool.
func closeConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Conn().Close(ctx)
	conn.Release() // a closed connection is destroyed
}

type watch struct {
	b      *backend
	conn   *pgxpool.Conn
	key    string
	cancel context.CancelFunc
	ch     chan struct{}
	done   chan struct{}
}

func (w *watch) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// run follows the key until ctx ends or the connection breaks; last is
// the state Watch started from.
func (w *watch) run(ctx context.Context, last described) {
	defer w.finish()
	want := payload(w.key)
	overdue := 0
	for {
		notified := false
		wake := expiryBound(last, overdue)
		for {
			wctx, cancel := ctx, context.CancelFunc(func() {})
			if !wake.IsZero() {
				wctx, cancel = context.WithDeadline(ctx, wake)
			}
			n, err := w.conn.Conn().WaitForNotification(wctx)
			timedOut := wctx.Err() != nil
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil && !timedOut:
				w.b.log.Debug("postgres: a watch's connection failed", "err", err)
				return
			case err != nil:
				// The holder's time is up: look again.
			case n.Payload != want:
				continue // another key of the table
			default:
				notified = true
				w.signal()
			}
			break
		}
		d, err := w.b.inspectOn(ctx, w.conn.Conn(), w.key)
		if err != nil {
			if ctx.Err() == nil {
				w.b.log.Debug("postgres: a watch could not inspect its key", "err", err)
			}
			return
		}
		switch {
		case notified:
			overdue = 0
		case d.info.Held != last.info.Held || d.info.Token != last.info.Token:
			overdue = 0
			w.signal() // an end nobody notified
		case d.info.Held:
			overdue++ // still held past its time: the server's timer is late
		}
		last = d
	}
}

// expiryBound is when a watch looks again at a lock that may end without
// a notification: just after the holder's time is up (zero: never, the
// key is free or its holder does not say). A holder still there past its
// time is looked at again after 10 ms, doubling up to 640 ms.
func expiryBound(d described, overdue int) time.Time {
	if !d.info.Held {
		return time.Time{}
	}
	left := d.info.TTL
	if left < 0 {
		left = d.ttl // the holder's idle time is hidden: its whole TTL from now
	}
	if left <= 0 && d.ttl <= 0 {
		return time.Time{}
	}
	return time.Now().Add(left + 10*time.Millisecond<<min(overdue, 6))
}

// finish drops the watch's connection (it listens and holds the watch lock)
// and gives its connection of the budget back.
func (w *watch) finish() {
	closeConn(w.conn)
	w.b.freeSlot()
	w.b.mu.Lock()
	delete(w.b.watches, w)
	w.b.mu.Unlock()
	close(w.ch)
	close(w.done)
}
