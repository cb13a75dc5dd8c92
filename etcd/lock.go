package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/locker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lock is one granted lock: the own waiter key, first in its range. It
// implements driver.Lock and driver.Expirer.
type lock struct {
	b     *backend
	sl    *sharedLease
	own   *ownKey
	key   string
	rev   int64 // the key's CreateRevision: the fencing token
	start time.Time
	lost  func(error)
}

func (l *lock) Token() uint64    { return uint64(l.rev) }
func (l *lock) Start() time.Time { return l.start }

// Refresh confirms with one linearizable txn that the own key still exists
// with its create revision. The key lives as long as the shared lease, which
// the backend renews in the background; only when the last renewal is too
// old to cover ttl from now is the lease renewed first, so the lock is
// provably alive on the server until at least the call plus ttl.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.sl.err(); err != nil {
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	}
	rctx, cancel := l.b.requestContext(ctx)
	defer cancel()
	if l.sl.validFrom().Before(time.Now()) {
		if err := l.sl.renew(rctx); err != nil {
			return err
		}
	}
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		l.sl.remove(l)
		l.own.free() // the key is gone: its name may serve again
		return fmt.Errorf("%w: key %q no longer exists with create revision %d", locker.ErrLeaseLost, l.key, l.rev)
	}
	return nil
}

// Release deletes the own key in a txn comparing its create revision, so a
// retried or late release never deletes a newer holder's key.
func (l *lock) Release(ctx context.Context) error {
	rctx, cancel := l.b.requestContext(ctx)
	defer cancel()
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(clientv3.OpDelete(l.key)).
		Commit()
	if err != nil {
		return err
	}
	l.sl.remove(l)
	l.own.free() // deleted now, or gone before
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %q no longer exists with create revision %d", locker.ErrLeaseLost, l.key, l.rev)
	}
	return nil
}

// Expire implements driver.Expirer. The shared lease outlives the lock's
// TTL while the backend runs, so a holder that stopped refreshing must free
// the lock itself when its local deadline passes: delete the own key
// (conditionally on its create revision). If the cluster cannot be reached
// now, the delete is retried in the background beyond ctx, until it
// succeeds, the lease dies (and the key with it) or the backend closes
// (revoking the lease): an outage shorter than the lease's life would
// otherwise end with the lease renewed and the key kept for good.
func (l *lock) Expire(ctx context.Context) {
	l.sl.remove(l)
	l.b.remove(ctx, l.own, l.rev)
}
