package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// lock is one granted lock: the own node, first in its directory.
type lock struct {
	b       *backend
	path    string
	czxid   int64
	session int64 // the node's ephemeralOwner
	start   time.Time
	lost    func(error)

	// watchCh is the watch on the own node, set by the grant; nil when the lock
	// was granted by its create alone: watchLoss then sets it.
	watchCh <-chan zk.Event
	// releasing is set before this lock deletes its own node, so that the
	// deletion it causes is not reported as a loss.
	releasing atomic.Bool
	// failed is set by a refresh that failed: the portable layer then
	// reports the lease lost and releases it (see Release).
	failed atomic.Bool
	// finished is set once the own node is deleted by this lock (or its
	// deletion given up): its loss is no longer watched.
	finished atomic.Bool

	// validUntil is the end of the validity promised to the holder (Start +
	// TTL, moved by each refresh): a lock declared lost while its session
	// may live on is not deleted before it (session.go).
	mu         sync.Mutex
	validUntil time.Time
	// watching is the current loss watch (nil until awaitLoss sets it),
	// for Refresh.
	watching <-chan zk.Event
	// shard is the loss watchers' shard waiting on watching, or nil;
	// guarded by lossWatchers.mu.
	shard *lossShard

	// pubMu serializes Publish; data is what the own node stores, as of
	// its data version (0 when created).
	pubMu   sync.Mutex
	data    nodeData
	version int32
}

func (l *lock) setWatch(ch <-chan zk.Event) {
	l.mu.Lock()
	l.watching = ch
	l.mu.Unlock()
}

func (l *lock) currentWatch() <-chan zk.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.watching
}

// newLock returns the lock of the own node at path, granted at start (zero
// when the caller sets it).
func newLock(b *backend, req *driver.Request, path string, czxid, session int64, start time.Time, watchCh <-chan zk.Event) *lock {
	return &lock{b: b, path: path, czxid: czxid, session: session, start: start, lost: req.Lost, watchCh: watchCh,
		validUntil: start.Add(req.TTL)}
}

// promise records that the lock is valid until at least t.
func (l *lock) promise(t time.Time) {
	l.mu.Lock()
	if t.After(l.validUntil) {
		l.validUntil = t
	}
	l.mu.Unlock()
}

func (l *lock) promisedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

var (
	_ driver.Lock               = (*lock)(nil)
	_ driver.Expirer            = (*lock)(nil)
	_ driver.ValidFromRefresher = (*lock)(nil)
)

func (l *lock) Token() uint64    { return uint64(l.czxid) }
func (l *lock) Start() time.Time { return l.start }

// watchLoss sets up the report of the lock's loss: its node deleted by
// someone else, or its session expired. The watch on the own node is
// waited on by the backend's loss watchers (losswatch.go), not by a
// goroutine of the lock's; it is set here when the grant did not set it.
func (l *lock) watchLoss() {
	if l.watchCh != nil {
		l.awaitLoss(l.watchCh)
		return
	}
	l.b.wg.Add(1)
	go func() {
		defer l.b.wg.Done()
		l.watchAgain()
	}()
}

// watchAgain sets a new watch on the own node, once it is checked to be
// still this lock's (rewatch), and hands it to the loss watchers.
func (l *lock) watchAgain() {
	if ch, ok := l.rewatch(); ok {
		l.awaitLoss(ch)
	}
}

// awaitLoss makes ch the lock's loss watch, for Refresh and for the loss
// watchers to wait on.
func (l *lock) awaitLoss(ch <-chan zk.Event) {
	l.setWatch(ch)
	l.b.losses.add(l, ch)
}

// lossEvent handles the event that ended the own node's watch, and watches
// the node again when it is still this lock's.
func (l *lock) lossEvent(ev zk.Event) {
	switch {
	case ev.Type == zk.EventNodeDeleted && l.releasing.Load():
		return
	case ev.Type == zk.EventNodeDeleted:
		l.report(errors.New("zookeeper: own node deleted by another client"))
		return
	case ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrSessionExpired):
		l.report(fmt.Errorf("zookeeper: session %#x expired: %w", l.session, ev.Err))
		return
	case ev.Type == zk.EventNotWatching:
		l.report(fmt.Errorf("zookeeper: connection closed: %w", eventCause(ev)))
		return
	}
	if l.finished.Load() || l.b.ctx.Err() != nil {
		return
	}
	// The node's data changed (a Publish), or Refresh took the event and
	// the closed channel gave a zero one: check the node and watch it
	// again.
	l.watchAgain()
}

// rewatch sets a watch on the own node and checks that the node is still
// this lock's, in its session. When it is not, or the watch cannot be set,
// it reports the loss (unless the lock is being released) and returns false.
//
// It reads the node with GetW, not ExistsW: on a node already deleted (by a
// Release that overtook a lock granted by its create) ExistsW would leave a
// watch for the node's creation on the client and the server, kept for the
// whole session since the name never comes back.
func (l *lock) rewatch() (<-chan zk.Event, bool) {
	_, st, w, err := l.b.conn.GetW(l.path)
	var cause error
	switch {
	case errors.Is(err, zk.ErrNoNode):
		cause = errors.New("zookeeper: own node gone")
	case err != nil:
		cause = fmt.Errorf("zookeeper: watching own node: %w", err)
	case st.Czxid != l.czxid:
		cause = errors.New("zookeeper: own node gone")
	case st.EphemeralOwner != l.session:
		cause = fmt.Errorf("zookeeper: own node belongs to session %#x, not %#x", st.EphemeralOwner, l.session)
	default:
		return w, true
	}
	if !l.releasing.Load() && l.b.ctx.Err() == nil {
		l.report(cause)
	}
	return nil, false
}

// RefreshValidFrom implements driver.ValidFromRefresher. It proves that the
// session was alive at the quorum after it began and that the own node is
// still this lease's, and returns the moment from which the leader counts
// the session's timeout, the TTL: the touch of an earlier request that has
// reached the leader (touch.go), or zero, which extends nothing, when none
// has yet. It syncs with the leader: a follower cut off from its peers,
// which answers reads from its stale copy while the leader expires the
// session, cannot answer a sync. Once the loss watch is set, the sync alone
// also proves the node: go-zookeeper delivers a watch event before any
// reply that follows it, and a server sends the deletion of a node it
// applied before it answers a later sync, so a watch still silent when the
// sync returns means the node was there as of the sync. Before that (just
// after a grant), or when the watch has fired (a Publish changes the node's
// data), the node is read after the sync.
func (l *lock) RefreshValidFrom(ctx context.Context, ttl time.Duration) (time.Time, error) {
	from, err := l.refresh(ctx, ttl)
	if err = unauthorized(err); err != nil {
		// The holder is told its lease is lost; the node may still be
		// there, in a live session: Release deletes it no earlier than the
		// validity promised before this refresh.
		l.failed.Store(true)
	}
	return from, err
}

// Refresh is RefreshValidFrom for callers of driver.Lock alone; the
// portable layer calls RefreshValidFrom.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	_, err := l.RefreshValidFrom(ctx, ttl)
	return err
}

func (l *lock) refresh(ctx context.Context, ttl time.Duration) (time.Time, error) {
	sent := time.Now()
	if ch := l.currentWatch(); ch != nil {
		err := l.b.do(ctx, func() error { return l.b.quorumSync(sent) })
		session := l.b.conn.SessionID()
		switch {
		case errors.Is(err, zk.ErrSessionExpired):
			return time.Time{}, fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
		case err != nil:
			return time.Time{}, err
		case session != l.session:
			return time.Time{}, fmt.Errorf("%w: own node belongs to session %#x, the connection now has session %#x", locker.ErrLeaseLost, l.session, session)
		}
		select {
		case <-ch:
			// Fired (or taken by the loss watchers): the node was
			// deleted, its data changed (a Publish), or the watch ended
			// with the connection. Read the node to tell. (lossEvent, if
			// they had not taken the event, then reads the closed channel
			// and checks the node itself.)
		default:
			return l.validFrom(sent, ttl), nil
		}
	}
	var (
		exists  bool
		st      *zk.Stat
		session int64
	)
	err := l.b.do(ctx, func() (err error) {
		exists, st, _, session, err = l.b.syncRead(l.path, false, sent)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return time.Time{}, fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	case err != nil:
		return time.Time{}, err
	case !exists || st.Czxid != l.czxid:
		return time.Time{}, fmt.Errorf("%w: own node %s is gone", locker.ErrLeaseLost, l.path)
	case st.EphemeralOwner != session:
		return time.Time{}, fmt.Errorf("%w: own node belongs to session %#x, the connection now has session %#x", locker.ErrLeaseLost, st.EphemeralOwner, session)
	}
	return l.validFrom(sent, ttl), nil
}

// validFrom returns the moment from which the leader counts the session's
// timeout as of a sync sent at sent and answered, and promises the lock
// valid until ttl after it (zero, promising nothing, when nothing proves
// one yet).
func (l *lock) validFrom(sent time.Time, ttl time.Duration) time.Time {
	from, ok := l.b.validFrom(sent, l.session)
	if !ok {
		return time.Time{}
	}
	l.promise(from.Add(ttl))
	return from
}

// Release deletes the own node. Its name carries the owner id, so no other
// owner's node is ever deleted.
func (l *lock) Release(ctx context.Context) error {
	return unauthorized(l.release(ctx))
}

func (l *lock) release(ctx context.Context) error {
	if l.failed.Load() && time.Now().Before(l.promisedUntil()) {
		// After a failed refresh (the clean-up of a lost lease): not
		// before the validity the holder was promised ends.
		l.deleteAfterPromise()
		return nil
	}
	l.releasing.Store(true)
	err := l.b.do(ctx, func() error { return l.b.conn.Delete(l.path, -1) })
	switch {
	case err == nil:
		l.finish()
		dir, name, _ := cutLast(l.path)
		if seq, ok := sequence(name); ok {
			l.b.resetDir(ctx, dir, seq)
		}
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		l.finish()
		return fmt.Errorf("%w: own node %s is gone", locker.ErrLeaseLost, l.path)
	}
	// Unknown outcome: the node may still be there, and its deletion by the
	// session's expiry or a later Release must still count.
	l.releasing.Store(false)
	return err
}

// Expire deletes the own node once the local deadline passed without a
// refresh: the session (kept alive by go-zookeeper's pings) would otherwise
// keep the lock past its TTL.
func (l *lock) Expire(ctx context.Context) {
	l.releasing.Store(true)
	dir, name, _ := cutLast(l.path)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.b.ctx, cancel)
	defer stop()
	backoff := 20 * time.Millisecond
	for {
		err := l.b.removeOnce(ctx, dir, "", name)
		if err == nil || !retryable(err) || ctx.Err() != nil || l.b.conn.SessionID() != l.session {
			break
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
	l.finish()
}

func (l *lock) finish() {
	l.finished.Store(true)
	l.b.losses.remove(l)
	l.b.untrack(l)
}

// report tells the portable layer the lock is lost and stops tracking it.
func (l *lock) report(cause error) {
	l.b.untrack(l)
	l.lost(cause)
}

func cutLast(p string) (dir, name string, ok bool) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p, false
	}
	return p[:i], p[i+1:], true
}
