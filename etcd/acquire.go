package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errPlaceLost: the own waiter key vanished while waiting — its shared
// lease died (not renewed in time by a loaded or cut-off server, or
// revoked) or someone deleted it. The Acquire held nothing and lost only its
// place: it queues again, on a new lease.
var errPlaceLost = errors.New("etcd: own waiter key is gone (lease expired or key deleted)")

// TryAcquire of a plain lock creates the own key only if the lock's range is
// empty: one txn guarded on the whole range having no key (CreateRevision
// == 0 over the prefix), so a failed attempt leaves nothing to delete; its
// else branch reads the holder's record, whose limit tells a busy lock from
// a mismatched one. An N-permit lock reads the range first (its oldest N
// keys and its count) and creates the own key only if fewer than N were
// there and none was created since (every key's CreateRevision at most the
// read's revision).
func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer markRefusals(&err)
	sl, err := b.lease(ctx, req.TTL)
	if err != nil {
		return nil, err
	}
	limit := max(req.Limit, 1)
	lp := lockPrefix(b.prefix, req.Key)
	own := sl.claim(lp, recordOf(req))
	oldest := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend),
		clientv3.WithLimit(int64(limit))}
	for {
		guard := clientv3.Compare(clientv3.CreateRevision(lp), "=", 0).WithPrefix()
		if limit > 1 {
			rctx, cancel := b.requestContext(ctx)
			resp, err := b.cli.Get(rctx, lp, oldest...)
			cancel()
			if err != nil {
				own.free()
				return nil, err
			}
			if err := mismatch(resp.Kvs, limit); err != nil || resp.Count >= int64(limit) {
				own.free()
				return nil, cmp.Or(err, locker.ErrLocked)
			}
			guard = clientv3.Compare(clientv3.CreateRevision(lp), "<", resp.Header.Revision+1).WithPrefix()
		}
		rctx, cancel := b.requestContext(ctx)
		sent := time.Now()
		resp, err := b.cli.Txn(rctx).
			If(guard, own.notTombstoned()).
			Then(clientv3.OpPut(own.name, own.value, clientv3.WithLease(sl.id))).
			Else(clientv3.OpGet(lp, oldest...)).
			Commit()
		cancel()
		if err != nil {
			if !sl.goneOn(err) {
				b.createFailed(ctx, own, err)
			}
			return nil, err
		}
		if resp.Succeeded {
			return b.granted(ctx, own, req, resp.Header.Revision, sent)
		}
		// Nothing was written. A plain lock is busy; an N-permit lock's
		// range changed since the read: read it again.
		if limit == 1 {
			own.free()
			return nil, cmp.Or(mismatch(resp.Responses[0].GetResponseRange().Kvs, limit), locker.ErrLocked)
		}
	}
}

// mismatch refuses a limit that differs from one recorded in kvs (a key
// whose record cannot be read, another writer's, is left out).
func mismatch(kvs []*mvccpb.KeyValue, limit int) error {
	for _, kv := range kvs {
		if l := limitOf(kv.Value); l != 0 && l != limit {
			return fmt.Errorf("%w: etcd: lock is in use with a limit of %d, not %d", locker.ErrInvalidOption, l, limit)
		}
	}
	return nil
}

// Acquire creates the own key in a txn guarded on its CreateRevision being 0
// and, in the same txn, reads the newest N+1 keys of the lock's range (N
// its limit, 1 for a plain lock): the own key and its predecessors, whose
// records must carry the same limit, and the range's count. With fewer than
// N predecessors the lock is held at once (one round trip); otherwise it
// waits. The key is created only once the Acquire has one of the Locker's
// maxQueued places in the lock's queue (places), kept until it holds the
// lock or gives up.
func (b *backend) Acquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer markRefusals(&err)
	lp := lockPrefix(b.prefix, req.Key)
	leave, err := b.places.Enter(ctx, lp)
	if err != nil {
		return nil, err
	}
	defer leave()
	for {
		l, err := b.queue(ctx, lp, req)
		if !errors.Is(err, errPlaceLost) {
			return l, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.log.Info("etcd: a waiting Acquire lost its place; queueing again", "key", req.Key, "cause", err)
	}
}

// queue creates the own key of an Acquire and waits until it holds the lock.
func (b *backend) queue(ctx context.Context, lp string, req *driver.Request) (_ driver.Lock, err error) {
	var sl *sharedLease
	err = patiently(ctx, nil, func() (err error) {
		sl, err = b.lease(ctx, req.TTL)
		return err
	})
	if err != nil {
		return nil, err
	}
	limit := max(req.Limit, 1)
	own := sl.claim(lp, recordOf(req))
	key := own.name
	var (
		resp *clientv3.TxnResponse
		sent time.Time
	)
	err = patiently(ctx, sl, func() (err error) {
		rctx, cancel := b.requestContext(ctx)
		defer cancel()
		sent = time.Now()
		resp, err = b.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), own.notTombstoned()).
			Then(
				clientv3.OpPut(key, own.value, clientv3.WithLease(sl.id)),
				// The put is the txn's newest write, so the own key sorts first.
				clientv3.OpGet(lp, clientv3.WithPrefix(),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(int64(limit+1))),
			).
			Commit()
		return err
	})
	if err != nil {
		if sl.goneOn(err) {
			// The lease died on the server first: the Acquire lost only
			// its place, and queues again on a new lease.
			return nil, sl.placeLost()
		}
		b.createFailed(ctx, own, err)
		return nil, err
	}
	if !resp.Succeeded {
		// A name is reused only once its key is known to be gone: someone
		// else wrote under our lease's name. The name stays reserved.
		return nil, fmt.Errorf("etcd: waiter key %q exists already", key)
	}
	rev := resp.Header.Revision
	rr := resp.Responses[1].GetResponseRange()
	if err := mismatch(rr.Kvs[1:], limit); err != nil {
		b.remove(ctx, own, rev)
		return nil, err
	}
	w := &waiter{own: own, lp: lp, rev: rev, limit: limit}
	if !w.update(rr.Kvs[1:], int(rr.Count-1), rev) {
		return b.granted(ctx, own, req, rev, sent)
	}
	start, err := b.wait(ctx, w)
	if err != nil {
		b.remove(ctx, own, rev)
		return nil, err
	}
	return b.granted(ctx, own, req, rev, start)
}

// waiter is one acquisition waiting for its lock: the keys created before
// its own (preds) number limit or more. What it watches keeps a release from
// waking more than one waiter (no herd) and serves waiters in the order of
// their keys' creation (FIFO):
//
//   - a plain lock's waiter watches its predecessor's deletion;
//   - an N-permit lock's first waiter (exactly N predecessors: the
//     holders) watches the deletions of the lock's whole range, any of which
//     may free a permit for it, and on every re-check after a wake-up
//     rewrites its own key unchanged, to wake the next waiter (as does a
//     later waiter found granted, with one more re-check);
//   - every later waiter watches its predecessor for any change: that
//     rewrite, or its deletion (granted and released, or cancelled).
type waiter struct {
	own      *ownKey
	lp       string // the lock's range
	rev      int64  // the own key's CreateRevision
	limit    int
	first    bool   // an N-permit lock's first waiter
	pred     string // the key watched, unless first
	watchRev int64  // the revision after the last read: the watch must see every change from it on
}

// update takes in a read at revision at of the own key's predecessors
// (newest first, at least the newest min(limit+1, count)) and their count;
// it reports whether the lock is still to be waited for.
func (w *waiter) update(preds []*mvccpb.KeyValue, count int, at int64) bool {
	if count < w.limit {
		return false
	}
	w.first = w.limit > 1 && count == w.limit
	w.pred, w.watchRev = string(preds[0].Key), at+1
	return true
}

// wait blocks until fewer than the limit of the lock's keys were created
// before the own key. After every wake-up, watch error or reconnect it
// re-checks with one linearizable txn that the own key still exists with
// its create revision — a watch can miss that the own key's lease expired
// meanwhile (Jepsen's etcd 3.4.3 finding against the concurrency package)
// — and reads the predecessors again. It returns when the re-check that
// found fewer than the limit was sent.
func (b *backend) wait(ctx context.Context, w *waiter) (time.Time, error) {
	backoff := newBackoff()
	sl := w.own.sl
	watching := true
	var watch waiterWatch
	defer watch.stop()
	// A plain lock needs its newest predecessor only; an N-permit lock the
	// newest N+1, to tell a first waiter from a later one.
	n := int64(1)
	if w.limit > 1 {
		n = int64(w.limit) + 1
	}
	preds := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(w.rev - 1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(n)}
	for {
		if watching {
			changed, err := watch.change(ctx, b.cli, sl, w)
			if err != nil {
				return time.Time{}, err
			}
			if changed {
				backoff.reset()
			} else if err := backoff.sleep(ctx, sl); err != nil {
				// The watch ended without news (leader lost, stream broken):
				// pace the re-checks so a dead cluster is not hammered.
				return time.Time{}, err
			}
		}
		ops := []clientv3.Op{clientv3.OpGet(w.lp, preds...)}
		nudged := w.first
		if nudged {
			ops = append(ops, clientv3.OpPut(w.own.name, w.own.value, clientv3.WithIgnoreLease()))
		}
		wakeups.Add(1)
		rctx, cancel := b.requestContext(ctx)
		sent := time.Now()
		resp, err := b.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(w.own.name), "=", w.rev)).
			Then(ops...).
			Commit()
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return time.Time{}, ctx.Err()
		case refused(err):
			return time.Time{}, err // waiting on will not make etcd permit it
		case err != nil:
			// A failover or a lost connection: the own key lives as long as
			// the shared lease, so keep waiting while the lease lives.
			if serr := backoff.sleep(ctx, sl); serr != nil {
				return time.Time{}, fmt.Errorf("%w (last re-check: %w)", serr, err)
			}
			watching = false
			continue
		case !resp.Succeeded:
			return time.Time{}, errPlaceLost
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if w.update(kvs, len(kvs), resp.Header.Revision) {
			watching = true
			continue
		}
		if w.limit == 1 || nudged {
			return sent, nil
		}
		// A later waiter granted without having been the first: the next
		// waiter watches this key and may now be the first. Re-check once
		// more, rewriting the key.
		w.first, watching = true, false
	}
}

// granted turns a won key into a Lock, registered with its lease for loss
// reports. start is when the request that won was sent; the lock claims no
// more than the lease guarantees.
func (b *backend) granted(ctx context.Context, own *ownKey, req *driver.Request, rev int64, start time.Time) (driver.Lock, error) {
	sl := own.sl
	l := &lock{b: b, sl: sl, own: own, key: own.name, rev: rev, lost: req.Lost}
	if v := sl.validFrom(); v.Before(start) {
		start = v
	}
	l.start = start
	if !sl.add(l) {
		// The lease died after the request that won was sent: nothing was
		// handed out, so the Acquire lost only its place and queues again
		// (a TryAcquire reports the cause, unavailable).
		b.remove(ctx, own, rev)
		return nil, sl.placeLost()
	}
	if req.MinHold > 0 {
		if err := b.startHold(ctx, l, req.MinHold); err != nil {
			l.hold.end()
			sl.remove(l)
			b.remove(ctx, own, rev)
			return nil, err
		}
	}
	return l, nil
}

// createFailed cleans up after a create txn that failed with err. Refused
// under backpressure, it was never proposed: the name is free again.
// Otherwise it may have been applied, or may still be (a request can reach
// the server after a later one): remove the key, tombstoning its name.
func (b *backend) createFailed(ctx context.Context, own *ownKey, err error) {
	if tooManyRequests(err) {
		own.free()
		return
	}
	b.remove(ctx, own, 0)
}

// remove deletes an own key that must not stay: a cancelled or failed wait,
// a lock that expired, or an acquire whose outcome is unknown (rev 0: see
// deleteOwn). If it cannot be deleted now it is retried in the background
// until it is, the lease dies (taking the key with it) or the backend
// closes (revoking the lease).
func (b *backend) remove(ctx context.Context, own *ownKey, rev int64) {
	ctx = context.WithoutCancel(ctx)
	err := b.deleteOwn(ctx, own, rev)
	if err == nil {
		return
	}
	b.log.Debug("etcd: clean-up of a key failed; retrying in the background", "key", own.name, "err", err)
	b.background(func(bctx context.Context) {
		backoff := newBackoff()
		for {
			if err := backoff.sleep(bctx, own.sl); err != nil {
				return
			}
			if b.deleteOwn(bctx, own, rev) == nil {
				return
			}
		}
	})
}

// deleteOwn deletes the own key if its create revision is rev; any answer
// means the key is gone or not ours, so its name is free again.
//
// When rev is 0 the create's outcome is unknown, and the create may still
// be on its way: a delete applied before it would leave a key that the
// shared lease keeps alive with nobody behind it. So the same txn writes
// the name's tombstone, which every create txn requires to be absent: a
// late create then fails. The key is deleted if it holds our owner id; the
// tombstone lives on the shared lease and the name is never used again on
// it.
func (b *backend) deleteOwn(ctx context.Context, own *ownKey, rev int64) error {
	rctx, cancel := b.requestContext(ctx)
	defer cancel()
	txn := b.cli.Txn(rctx)
	if rev == 0 {
		tomb := clientv3.OpPut(own.tomb, "", clientv3.WithLease(own.sl.id))
		txn = txn.If(clientv3.Compare(clientv3.Value(own.name), "=", own.value)).
			Then(clientv3.OpDelete(own.name), tomb).
			Else(tomb)
	} else {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(own.name), "=", rev)).
			Then(clientv3.OpDelete(own.name))
	}
	if _, err := txn.Commit(); err != nil {
		return err
	}
	if rev != 0 {
		own.free()
	}
	return nil
}

// tooManyRequests reports etcd's backpressure ("etcdserver: too many
// requests"): the server's apply loop is too far behind its commit index,
// and it refused the request before proposing it. Nothing was written, so
// the request may be sent again.
func tooManyRequests(err error) bool { return errors.Is(err, rpctypes.ErrTooManyRequests) }

// patiently runs fn again, after a jittered backoff, for as long as the
// server answers with backpressure and ctx lasts (and sl lives, if not nil).
// A blocking Acquire uses it; TryAcquire makes one attempt.
func patiently(ctx context.Context, sl *sharedLease, fn func() error) error {
	bo := newBackoff()
	for {
		err := fn()
		if !tooManyRequests(err) {
			return err
		}
		if serr := bo.sleep(ctx, sl); serr != nil {
			return fmt.Errorf("%w (last attempt: %w)", serr, err)
		}
	}
}

// backoff paces retries: 50 ms doubling to 1 s, each wait drawn at random
// from its upper half, so that clients refused together do not return
// together.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Millisecond} }

func (b *backoff) reset() { b.d = 50 * time.Millisecond }

// sleep waits the current delay; it fails early when ctx ends or the lease
// (if not nil) dies, and the Acquire with it has lost its place.
func (b *backoff) sleep(ctx context.Context, sl *sharedLease) error {
	t := time.NewTimer(b.d/2 + rand.N(b.d/2+1))
	defer t.Stop()
	b.d = min(2*b.d, time.Second)
	var dead <-chan struct{}
	if sl != nil {
		dead = sl.done
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-dead:
		return sl.placeLost()
	case <-t.C:
		return nil
	}
}
