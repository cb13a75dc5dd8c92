package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

var _ driver.Publisher = (*backend)(nil)

// Publish implements driver.Publisher: it writes the value into the own
// node's data, conditionally on the data version the lock last saw, so it
// changes nothing when the node is gone (its session expired, or it was
// deleted) — the name carries the owner id, and is never made again.
func (b *backend) Publish(ctx context.Context, dl driver.Lock, value string) error {
	return unauthorized(b.publish(ctx, dl, value))
}

func (b *backend) publish(ctx context.Context, dl driver.Lock, value string) error {
	l, ok := dl.(*lock)
	if !ok || l.b != b {
		return fmt.Errorf("%w: not a lock of this Locker", locker.ErrLeaseLost)
	}
	l.pubMu.Lock()
	defer l.pubMu.Unlock()
	if l.releasing.Load() || l.failed.Load() {
		return fmt.Errorf("%w: own node %s is being deleted", locker.ErrLeaseLost, l.path)
	}
	d := l.data
	d.value = value
	// Two attempts: a conditional write that finds another version means an
	// earlier Publish whose reply was lost (or whose context ended) was
	// applied; the node is read, and written again if it is still ours.
	for range 2 {
		if s := b.conn.SessionID(); s != l.session {
			return fmt.Errorf("%w: own node belongs to session %#x, the connection now has session %#x", locker.ErrLeaseLost, l.session, s)
		}
		var st *zk.Stat
		err := b.do(ctx, func() (err error) {
			st, err = b.conn.Set(l.path, d.encode(), l.version)
			return err
		})
		switch {
		case err == nil:
			l.data, l.version = d, st.Version
			return nil
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
			return fmt.Errorf("%w: own node %s is gone: %w", locker.ErrLeaseLost, l.path, err)
		case !errors.Is(err, zk.ErrBadVersion):
			return err
		}
		err = b.do(ctx, func() (err error) {
			_, st, err = b.conn.Get(l.path)
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("%w: own node %s is gone", locker.ErrLeaseLost, l.path)
		case err != nil:
			return err
		case st.Czxid != l.czxid || st.EphemeralOwner != l.session:
			return fmt.Errorf("%w: node %s is no longer this lease's", locker.ErrLeaseLost, l.path)
		}
		l.version = st.Version
	}
	return fmt.Errorf("zookeeper: publish: the data of %s changed under a second conditional write", l.path)
}
