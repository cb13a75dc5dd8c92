package redis

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/distlock/locker"
)

// DefaultPrefix starts the name of every Redis key and channel this package
// uses, unless WithPrefix says otherwise.
const DefaultPrefix = "locker:"

// names are the Redis names of one lock.
type names struct {
	tag       string // the encoded key: the hash tag of every name below
	lock      string // holds the owner value, grant time and published value while held (take.lua); expires with the TTL
	fence     string // the last fencing token; never expires, never deleted
	queue     string // the waiters, by arrival (sorted set); expires when abandoned
	deadlines string // waiter id -> when its entry is stale (hash); expires likewise
	events    string // the channel the scripts signal the lock's changes on (queue.lua: signal)
	sem       string // an N-permit lock's permits (sorted set, permits.lua); live as long as the last
	sinfo     string // their grant times and tokens (hash); likewise
}

// encodeKey maps a stored lock key (any bytes, NUL included) to a hash tag.
// Base64url has no '{' or '}', so the tag is always the whole encoded key:
// the lock, fence and queue keys land in one Cluster slot whatever the key
// holds, and distinct keys give distinct names (the encoding is injective).
func encodeKey(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

func (b *base) names(key string) names {
	tag := encodeKey(key)
	p := b.prefix + "{" + tag + "}"
	// The names are slices of one string: every acquisition needs them,
	// and one allocation costs less than seven.
	all := p + ":lock" + p + ":fence" + p + ":q" + p + ":qd" + p + ":ev" + p + ":sem" + p + ":si"
	cut := func(suffix string) (name string) {
		name, all = all[:len(p)+len(suffix)], all[len(p)+len(suffix):]
		return name
	}
	n := names{tag: tag}
	n.lock = cut(":lock")
	n.fence = cut(":fence")
	n.queue = cut(":q")
	n.deadlines = cut(":qd")
	n.events = cut(":ev")
	n.sem = cut(":sem")
	n.sinfo = cut(":si")
	return n
}

// channelPrefix starts the name of every Locker's wake-up channel under
// prefix: a Locker with id x listens on channelPrefix(prefix) + x, and the
// scripts publish a waiter's id (x, a colon, a sequence number) there.
func channelPrefix(prefix string) string { return prefix + "w:" }

// checkPrefix refuses a prefix that would break the hash tag: Redis takes the
// first '{…}' of a key name as its tag, so the prefix may hold no brace.
func checkPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("%w: redis key prefix %q contains '{' or '}', which would change the Cluster hash tag", locker.ErrInvalidOption, p)
	}
	return nil
}

// guardSpace ends every Guard's key prefix: a Guard's names are its prefix,
// guardSpace, then "{" + encoded resource + "}…".
const guardSpace = "guard:"

// checkLockerPrefix is checkPrefix for a Locker, which also keeps out of
// the Guards' key space: a Locker prefix ending in guardSpace would name its
// fence exactly as a Guard names its own.
func checkLockerPrefix(p string) error {
	if strings.HasSuffix(p, guardSpace) {
		return fmt.Errorf("%w: redis key prefix %q ends in %q, the key space of Guards", locker.ErrInvalidOption, p, guardSpace)
	}
	return checkPrefix(p)
}

var errNoClient = errors.New("redis: nil client")
