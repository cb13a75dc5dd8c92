package etcd

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
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
	hold  *minHold // nil without a minimum hold
}

func (l *lock) Token() uint64    { return uint64(l.rev) }
func (l *lock) Start() time.Time { return l.start }

// Refresh confirms with one linearizable txn that the own key still exists
// with its create revision. The key lives as long as the shared lease, which
// the backend renews in the background; only when the last renewal is too
// old to cover ttl from now is the lease renewed first, so the lock is
// provably alive on the server until at least the call plus ttl.
func (l *lock) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer markRefusals(&err)
	if err := l.sl.err(); err != nil {
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	}
	if l.sl.validFrom().Before(time.Now()) {
		if err := l.sl.renew(ctx, l.b.timeout); err != nil {
			return err
		}
	}
	return l.whileOwn(ctx)
}

// Release deletes the own key in a txn comparing its create revision, so a
// retried or late release never deletes a newer holder's key.
//
// Inside a minimum hold it parks the key on the hold lease instead.
func (l *lock) Release(ctx context.Context) (err error) {
	defer markRefusals(&err)
	if parked, err := l.park(ctx); parked {
		return err
	}
	l.hold.end()
	err = l.whileOwn(ctx, clientv3.OpDelete(l.key))
	if err == nil {
		l.sl.remove(l)
		l.own.free()
	}
	return err
}

// Publish implements driver.Publisher: it rewrites the own key's record with
// the new value, keeping its lease, in a txn comparing its create revision
// (a put leaves the create revision, and so the token, as it was).
func (b *backend) Publish(ctx context.Context, dl driver.Lock, value string) (err error) {
	defer markRefusals(&err)
	l, ok := dl.(*lock)
	if !ok || l.b != b {
		return fmt.Errorf("%w: not a lock of this Locker", locker.ErrLeaseLost)
	}
	if err := l.sl.err(); err != nil {
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	}
	rec := l.own.rec
	rec.value = value
	return l.whileOwn(ctx, clientv3.OpPut(l.key, rec.encode(), clientv3.WithIgnoreLease()))
}

// whileOwn commits ops in one txn if, and only if, the own key still exists
// with its create revision. If it does not, the lock is lost: it returns
// locker.ErrLeaseLost, and the key's name may serve again.
func (l *lock) whileOwn(ctx context.Context, ops ...clientv3.Op) error {
	rctx, cancel := l.b.requestContext(ctx)
	defer cancel()
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)).
		Then(ops...).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		l.sl.remove(l)
		l.own.free()
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
//
// Inside a minimum hold it parks the key on the hold lease instead, and
// deletes it only if that fails.
func (l *lock) Expire(ctx context.Context) {
	if parked, err := l.park(ctx); parked && err == nil {
		return
	}
	l.hold.end()
	l.sl.remove(l)
	l.b.remove(ctx, l.own, l.rev)
}
