package locker

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/distlock/locker/driver"
)

// LockInfo describes one lock as its backend sees it (Inspect, List). It
// never carries the owner id, which is the capability to release the lock.
type LockInfo struct {
	// Key is the key as given to Acquire (without the namespace).
	Key string
	// Held reports whether the lock is held now.
	Held bool
	// Owner is the holder's WithOwner label.
	Owner string
	// Value is the holder's published value (WithValue, Publish).
	Value string
	// Token is the holder's fencing token.
	Token uint64
	// Granted is when the lock was granted, on the server's clock; zero
	// where the backend does not record it (see README.md).
	Granted time.Time
	// TTL is the time left before the server frees the lock unless it is
	// refreshed; negative where the backend does not say.
	TTL time.Duration
	// Waiters counts acquisitions queued for the lock; negative where the
	// backend does not say.
	Waiters int
}

// listPage is how many locks List asks the backend for at a time.
const listPage = 100

// inspector returns l's backend as a driver.Inspector: the one place the
// ability is asserted.
func inspector(l Locker) (*client, driver.Inspector, error) {
	c, ok := l.(*client)
	if !ok {
		return nil, nil, fmt.Errorf("inspect: %w: not a Locker of package locker", ErrUnsupported)
	}
	in, ok := c.b.(driver.Inspector)
	if !ok {
		return c, nil, fmt.Errorf("%s: inspect: %w", c.name, ErrUnsupported)
	}
	return c, in, nil
}

// Inspect tells who holds key in l's key space (its namespace): the holder's
// owner label, token, grant time, the time left, and the waiters — as much
// as the backend records. A free key has Held false. A backend without the
// ability answers ErrUnsupported.
func Inspect(ctx context.Context, l Locker, key string) (LockInfo, error) {
	c, in, err := inspector(l)
	if err != nil {
		return LockInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return LockInfo{}, &opError{c.name, "inspect", key, err}
	}
	info, err := in.Inspect(ctx, storedKey(c.opts.namespace, key))
	if err != nil {
		return LockInfo{}, wrapError(ctx, c.name, "inspect", key, err)
	}
	return fromDriver(info, key), nil
}

// List yields the locks held under prefix in l's key space ("" for all),
// asking the backend for a page at a time, in the backend's order. A
// backend without the ability yields ErrUnsupported. Stop ranging to stop
// early.
func List(ctx context.Context, l Locker, prefix string) iter.Seq2[LockInfo, error] {
	return func(yield func(LockInfo, error) bool) {
		c, in, err := inspector(l)
		if err != nil {
			yield(LockInfo{}, err)
			return
		}
		ns := c.opts.namespace
		stored := storedKey(ns, prefix)
		cursor := ""
		for {
			page, next, err := in.List(ctx, stored, cursor, listPage)
			if err != nil {
				yield(LockInfo{}, wrapError(ctx, c.name, "list", prefix, err))
				return
			}
			for _, info := range page {
				key, ok := userKey(ns, info.Key)
				if !ok {
					continue // another namespace's lock
				}
				if !yield(fromDriver(info, key), nil) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}

// userKey undoes storedKey for a Locker with namespace ns; false for a key
// of another namespace.
func userKey(ns, stored string) (string, bool) {
	if ns == "" {
		return stored, !strings.Contains(stored, "\x00")
	}
	return strings.CutPrefix(stored, ns+"\x00")
}

func fromDriver(info driver.LockInfo, key string) LockInfo {
	return LockInfo{Key: key, Held: info.Held, Owner: info.Label, Value: info.Value, Token: info.Token,
		Granted: info.Granted, TTL: info.TTL, Waiters: info.Waiters}
}
