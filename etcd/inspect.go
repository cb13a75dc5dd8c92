package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/distlock/locker/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect implements driver.Inspector with one read of the lock's range at
// one revision: its oldest key (the holder, whose create revision is the
// token) and the number of keys (the others are waiters). Of an N-permit
// lock it reports the oldest permit's holder, and as waiters the keys
// beyond the first N. The time left is
// asked of the holder's lease afterwards; etcd records no grant time.
func (b *backend) Inspect(ctx context.Context, key string) (_ driver.LockInfo, err error) {
	defer markRefusals(&err)
	holder, keys, err := b.readLock(ctx, lockPrefix(b.prefix, key), 0)
	if err != nil {
		return driver.LockInfo{}, err
	}
	return b.describe(ctx, key, holder, keys, map[clientv3.LeaseID]time.Duration{})
}

// readLock reads the oldest key of a lock's range (nil if none) and how
// many keys the range holds, at revision rev (0: the newest). The server
// sorts the whole range for it, so the cost grows with the lock's waiters.
func (b *backend) readLock(ctx context.Context, lp string, rev int64) (*mvccpb.KeyValue, int64, error) {
	rctx, cancel := b.requestContext(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, lp, clientv3.WithPrefix(), clientv3.WithRev(rev),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, err
	}
	return resp.Kvs[0], resp.Count, nil
}

// describe makes the LockInfo of a lock whose oldest key is holder (nil: no
// key) among keys keys; ttls caches the time left of the leases asked.
func (b *backend) describe(ctx context.Context, key string, holder *mvccpb.KeyValue, keys int64, ttls map[clientv3.LeaseID]time.Duration) (driver.LockInfo, error) {
	if holder == nil {
		return driver.LockInfo{Key: key}, nil
	}
	rec, _ := decodeRecord(string(holder.Value))
	info := driver.LockInfo{Key: key, Held: true, Label: rec.label, Value: rec.value, Token: uint64(holder.CreateRevision),
		TTL: -1, Waiters: int(max(keys-int64(max(rec.limit, 1)), 0))}
	id := clientv3.LeaseID(holder.Lease)
	if id == clientv3.NoLease {
		return info, nil // not a Locker's key: it has no lease, so no end
	}
	ttl, ok := ttls[id]
	if !ok {
		var err error
		if ttl, err = b.timeLeft(ctx, id); err != nil {
			return driver.LockInfo{}, err
		}
		ttls[id] = ttl
	}
	info.TTL = ttl
	return info, nil
}

// timeLeft is how long a holder's lock lasts at most unless it is
// refreshed: the time left of its lease, but no more than the lock TTL the
// lease serves. A live holder's client deletes its key within that TTL of
// its last refresh (Expire), while it renews the shared lease further; a
// crashed holder's key lives as long as the lease, up to R more (see
// docs/design/etcd.md). A lease already gone leaves nothing.
func (b *backend) timeLeft(ctx context.Context, id clientv3.LeaseID) (time.Duration, error) {
	rctx, cancel := b.requestContext(ctx)
	defer cancel()
	resp, err := b.cli.TimeToLive(rctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case resp.TTL < 0: // the lease is gone, and its keys with it
		return 0, nil
	}
	return time.Duration(min(resp.TTL, lockTTLOf(resp.GrantedTTL))) * time.Second, nil
}

// lockTTLOf is the lock TTL in seconds that a shared lease granted for
// leaseSecs serves: T such that T + reserve(T) = leaseSecs, or, for a lease
// that the server granted longer than asked (its minimum), the longest T
// that such a lease covers.
func lockTTLOf(leaseSecs int64) int64 {
	// ⌈L/6⌉ is reserve(T) when L = T + reserve(T); in any case T fits.
	t := leaseSecs - (leaseSecs+5)/6
	for t+1+reserve(t+1) <= leaseSecs {
		t++
	}
	return t
}

// List implements driver.Inspector. One page is one read of at most limit
// keys of the Locker's key space from the cursor, in key order, and so at
// most limit locks; a lock whose keys run past the page is read whole at
// the page's revision. The cursor is the etcd key after the last lock
// returned.
func (b *backend) List(ctx context.Context, prefix, cursor string, limit int) (_ []driver.LockInfo, _ string, err error) {
	defer markRefusals(&err)
	from := b.prefix + escape(prefix)
	end := clientv3.GetPrefixRangeEnd(from)
	if cursor > from {
		from = cursor
	}
	if from >= end {
		return nil, "", nil
	}
	rctx, cancel := b.requestContext(ctx)
	resp, err := b.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(max(limit, 1))))
	cancel()
	if err != nil {
		return nil, "", err
	}
	var (
		locks  []driver.LockInfo
		ttls   = map[clientv3.LeaseID]time.Duration{}
		next   string
		lock   string           // the escaped key of the group being read
		stored string           // and its stored key
		holder *mvccpb.KeyValue // its oldest key so far
		keys   int64
	)
	flush := func(whole bool) error {
		if lock == "" {
			return nil
		}
		if !whole {
			var err error
			holder, keys, err = b.readLock(ctx, lockPrefix(b.prefix, stored), resp.Header.Revision)
			if err != nil {
				return err
			}
		}
		info, err := b.describe(ctx, stored, holder, keys, ttls)
		if err != nil {
			return err
		}
		locks = append(locks, info)
		next = b.prefix + lock + "\x01" // past every key of the lock
		lock, holder, keys = "", nil, 0
		return nil
	}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		esc, key, ok := lockOf(b.prefix, k)
		if esc != lock {
			if err := flush(true); err != nil {
				return nil, "", err
			}
		}
		if !ok {
			next = k + "\x00" // a tombstone or a key of another Locker
			continue
		}
		lock, stored, keys = esc, key, keys+1
		if holder == nil || kv.CreateRevision < holder.CreateRevision {
			holder = kv
		}
	}
	if err := flush(!resp.More); err != nil {
		return nil, "", err
	}
	if !resp.More {
		next = ""
	}
	return locks, next, nil
}

// lockOf returns the escaped and the stored lock key of an etcd key under
// prefix, or false for a key that is no lock's waiter key: a tombstone, a
// key of a Locker whose prefix extends this one, or another writer's.
func lockOf(prefix, k string) (esc, stored string, ok bool) {
	rest, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return "", "", false
	}
	esc, _, ok = strings.Cut(rest, "\x00")
	if !ok || esc == "" || strings.Contains(esc, "/") {
		return "", "", false
	}
	if stored, ok = unescape(esc); !ok {
		return "", "", false
	}
	return esc, stored, true
}
