package zookeeper

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/driver"
)

var _ driver.Inspector = (*backend)(nil)

// maxInspectAttempts bounds how often Inspect reads a queue again when its
// first node went away between the listing and the read of that node.
const maxInspectAttempts = 8

// Inspect implements driver.Inspector. It syncs first, so that it sees every
// change the leader committed before Inspect was called, even through a
// follower that lags (see docs/design/zookeeper.md, "Inspection").
func (b *backend) Inspect(ctx context.Context, key string) (driver.LockInfo, error) {
	info, err := b.inspect(ctx, key)
	return info, unauthorized(err)
}

func (b *backend) inspect(ctx context.Context, key string) (driver.LockInfo, error) {
	dir := b.dir(key)
	err := b.do(ctx, func() error {
		_, err := b.conn.Sync(dir)
		return ignoreNoNode(err)
	})
	if err != nil {
		return driver.LockInfo{}, err
	}
	return b.inspectDir(ctx, key, dir)
}

// inspectDir describes the lock of dir, key's directory: held when its queue
// has a first node, by that node's holder (of an N-permit lock: the oldest
// permit's).
func (b *backend) inspectDir(ctx context.Context, key, dir string) (driver.LockInfo, error) {
	for range maxInspectAttempts {
		var kids []string
		err := b.do(ctx, func() (err error) {
			kids, _, err = b.conn.Children(dir)
			return ignoreNoNode(err)
		})
		if err != nil {
			return driver.LockInfo{}, err
		}
		q, err := b.queue(ctx, dir, kids)
		if err != nil {
			return driver.LockInfo{}, err
		}
		if len(q) == 0 {
			return driver.LockInfo{Key: key, TTL: -1}, nil
		}
		var (
			raw []byte
			st  *zk.Stat
		)
		err = b.do(ctx, func() (err error) {
			raw, st, err = b.conn.Get(dir + "/" + q[0].name)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: list the queue again
		}
		if err != nil {
			return driver.LockInfo{}, err
		}
		d := decodeData(raw)
		ttl := time.Duration(-1)
		if d.ttl > 0 {
			ttl = d.ttl
		}
		// An N-permit lock shows its oldest permit; the nodes past the
		// first N wait.
		return driver.LockInfo{Key: key, Held: true, Label: d.label, Value: d.value, Token: uint64(st.Czxid),
			Granted: time.UnixMilli(st.Ctime), TTL: ttl, Waiters: max(len(q)-d.limit, 0)}, nil
	}
	return driver.LockInfo{}, fmt.Errorf("the queue of %s changed %d times while it was read", dir, maxInspectAttempts)
}

// List implements driver.Inspector. The lock directories under the root are
// visited in the order of their names (the keys in base64url), at most limit
// of them per call, read in parallel; the cursor is the name of the last one
// visited. ZooKeeper lists a node's children in one reply, so each call
// lists the root's children whole (names only).
func (b *backend) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.LockInfo, string, error) {
	locks, next, err := b.list(ctx, prefix, cursor, limit)
	return locks, next, unauthorized(err)
}

func (b *backend) list(ctx context.Context, prefix, cursor string, limit int) ([]driver.LockInfo, string, error) {
	var names []string
	err := b.do(ctx, func() (err error) {
		if _, err = b.conn.Sync(b.root); err != nil {
			return ignoreNoNode(err)
		}
		names, _, err = b.conn.Children(b.root)
		return ignoreNoNode(err)
	})
	if err != nil {
		return nil, "", err
	}
	// Keys that start with prefix have names that start with the encoding
	// of its whole 3-byte groups; each candidate is decoded and checked.
	encPrefix := base64.RawURLEncoding.EncodeToString([]byte(prefix[:len(prefix)/3*3]))
	slices.Sort(names)
	start, _ := slices.BinarySearch(names, cursor)
	if start < len(names) && names[start] == cursor && cursor != "" {
		start++
	}
	type dirKey struct{ name, key string }
	var visit []dirKey
	next := ""
	for _, n := range names[start:] {
		if !strings.HasPrefix(n, encPrefix) {
			if n > encPrefix {
				break // sorted: no later name has the prefix
			}
			continue
		}
		if len(visit) == limit {
			next = visit[len(visit)-1].name
			break
		}
		k, err := base64.RawURLEncoding.DecodeString(n)
		if err != nil || !strings.HasPrefix(string(k), prefix) {
			visit = append(visit, dirKey{name: n}) // visited, not a lock of prefix
			continue
		}
		visit = append(visit, dirKey{name: n, key: string(k)})
	}

	infos := make([]driver.LockInfo, len(visit))
	errs := make([]error, len(visit))
	err = b.do(ctx, func() error {
		var wg sync.WaitGroup
		for i, v := range visit {
			if v.key == "" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				infos[i], errs[i] = b.inspectDir(ctx, v.key, b.root+"/"+v.name)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, "", err
	}
	locks := make([]driver.LockInfo, 0, len(infos))
	for _, in := range infos {
		if in.Held {
			locks = append(locks, in)
		}
	}
	return locks, next, nil
}
