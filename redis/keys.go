package redis

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/distlock/locker"
)

// DefaultPrefix starts the name of every Redis key and channel this package
// uses, unless Config.Prefix says otherwise.
const DefaultPrefix = "locker:"

// names are the Redis names of one lock.
type names struct {
	tag   string // the encoded key: the hash tag, and the key in wake-up messages
	lock  string // holds the owner value while held; expires with the TTL
	fence string // the last fencing token; never expires, never deleted
}

// encodeKey maps a stored lock key (any bytes, NUL included) to a hash tag.
// Base64url has no '{' or '}', so the tag is always the whole encoded key:
// the lock and fence keys land in one Cluster slot whatever the key holds,
// and distinct keys give distinct names (the encoding is injective).
func encodeKey(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

func (b *base) names(key string) names {
	tag := encodeKey(key)
	p := b.prefix + "{" + tag + "}"
	return names{tag: tag, lock: p + ":lock", fence: p + ":fence"}
}

// channel is the one pub/sub channel on which releases of every lock under
// prefix are announced.
func channel(prefix string) string { return prefix + "released" }

// wakeMessage is what release.lua publishes: the encoded key and the owner
// id, so that a Redlock waiter hearing one release from several masters is
// woken once.
func wakeMessage(tag, owner string) string { return tag + " " + owner }

func parseWake(msg string) (tag, owner string) {
	tag, owner, _ = strings.Cut(msg, " ")
	return tag, owner
}

// checkPrefix refuses a prefix that would break the hash tag: Redis takes the
// first '{…}' of a key name as its tag, so the prefix may hold no brace.
func checkPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("%w: redis key prefix %q contains '{' or '}', which would change the Cluster hash tag", locker.ErrInvalidOption, p)
	}
	return nil
}

var errNoClient = errors.New("redis: nil client")
