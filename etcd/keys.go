package etcd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the etcd key prefix under which a Locker keeps its locks
// when neither WithPrefix nor the URL path names one.
const DefaultPrefix = "locker/"

// escape encodes a stored lock key (any bytes, including '/' and NUL) as a
// single path segment: '%', '/' and NUL become %25, %2F and %00, every other
// byte stays as it is so that keys read naturally in etcdctl. The encoding is
// injective (it can be decoded), and the result contains neither '/' nor
// NUL, which is what keeps the key ranges of "a" and "a/b", and of nested
// prefixes, disjoint: see lockPrefix.
func escape(key string) string {
	if !strings.ContainsAny(key, "%/\x00") {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		case 0:
			b.WriteString("%00")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// lockPrefix is the range holding one lock's waiter keys: prefix, the
// escaped key, and a NUL. Neither a prefix (normalizePrefix refuses NUL)
// nor an escaped key holds a NUL, so the first NUL of any key a Locker
// writes ends its prefix+escaped key; and since a prefix ends with '/' and
// an escaped key holds none, that string splits into prefix and key in one
// way only. So the range of one (prefix, key) never contains the keys of
// another, even when one prefix extends another: prefix P/ with key "k" and
// prefix P/k/ with key "x" stay apart (a '/' terminator made P/k/ a range
// containing every lock of the prefix P/k/).
func lockPrefix(prefix, key string) string {
	return prefix + escape(key) + "\x00"
}

// tombstoneKey is the key that, once written, stops a create of the waiter
// key name whose outcome was unknown from ever taking effect: every create
// txn requires it to be absent (see backend.deleteOwn). It sits outside
// every lock range of every prefix: its first NUL follows its prefix, which
// ends with '/', while a lock range's first NUL follows an escaped key.
func tombstoneKey(prefix, name string) string {
	return prefix + "\x00" + name[len(prefix):]
}

// normalizePrefix checks a Locker's key prefix and ends it with '/'.
func normalizePrefix(prefix string) (string, error) {
	return checkPrefix(prefix, DefaultPrefix)
}

// checkPrefix checks a key prefix (def if empty) and ends it with '/'.
func checkPrefix(prefix, def string) (string, error) {
	if prefix == "" {
		prefix = def
	}
	if strings.IndexByte(prefix, 0) >= 0 {
		return "", fmt.Errorf("%w: etcd: prefix %q contains NUL", locker.ErrInvalidOption, prefix)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix, nil
}

// waiterKey is the etcd key of one acquisition: the lock's prefix, the id of
// the shared lease the key is attached to, and a slot number that the
// Locker hands to one acquisition of this lock at a time (see slots). So two
// acquisitions never share an etcd key, even when they share a lease (the
// shared-session bug of concurrency.Mutex, whose key is the prefix and the
// lease id), while a Locker that takes the same lock again and again reuses
// one name. Fresh names per acquisition would each leave a tombstone in
// etcd's key index until the next compaction, and every range read over the
// lock (the owner and predecessor reads) would wade through them: the
// acquire cost would grow with the lock's history.
func waiterKey(prefix string, lease clientv3.LeaseID, slot int) string {
	return prefix + strconv.FormatInt(int64(lease), 16) + "-" + strconv.Itoa(slot)
}

// record is what a waiter key holds: the acquisition's owner id, which also
// makes a key whose creation is in doubt deletable by its owner only, the
// lock's limit (how many permits it has), and for inspection its owner label
// and published value.
type record struct {
	owner driver.OwnerID
	limit int // 1 for a plain lock
	label string
	value string
}

// recordOf is the record of an acquisition.
func recordOf(req *driver.Request) record {
	return record{owner: req.Owner, limit: max(req.Limit, 1), label: req.Label, value: req.Value}
}

// encode writes a plain lock's record without a value as "owner label", the
// layout of the versions before values and limits, so that they and this
// one read each other's records; otherwise as "owner#limit+n label value",
// n being the label's length in decimal, because a label may hold any byte
// ("#limit" only when the limit is above 1).
func (r record) encode() string {
	if r.value == "" && r.limit <= 1 {
		return r.owner.String() + " " + r.label
	}
	limit := ""
	if r.limit > 1 {
		limit = "#" + strconv.Itoa(r.limit)
	}
	return r.owner.String() + limit + "+" + strconv.Itoa(len(r.label)) + " " + r.label + r.value
}

// decodeRecord decodes an encoded record (its owner is left zero); false
// for a value that no Locker wrote.
func decodeRecord(s string) (record, bool) {
	const n = 2 * len(driver.OwnerID{})
	if len(s) <= n {
		return record{}, false
	}
	r := record{limit: 1}
	rest := s[n+1:]
	if s[n] == '#' {
		digits, tail, found := strings.Cut(rest, "+")
		limit, err := strconv.Atoi(digits)
		if !found || err != nil || limit < 2 {
			return record{}, false
		}
		r.limit, rest = limit, tail
	} else if s[n] == ' ' {
		r.label = rest
		return r, true
	} else if s[n] != '+' {
		return record{}, false
	}
	digits, tail, found := strings.Cut(rest, " ")
	size, err := strconv.Atoi(digits)
	if !found || err != nil || size < 0 || size > len(tail) {
		return record{}, false
	}
	r.label, r.value = tail[:size], tail[size:]
	return r, true
}

// limitOf is the limit recorded in an encoded record, 0 if none can be read.
func limitOf(s []byte) int {
	r, ok := decodeRecord(string(s))
	if !ok {
		return 0
	}
	return r.limit
}

// unescape inverts escape; false for a segment escape cannot have made
// (another writer's key under the prefix).
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1 : min(i+3, len(s))] {
		case "25":
			b.WriteByte('%')
		case "2F":
			b.WriteByte('/')
		case "00":
			b.WriteByte(0)
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}
