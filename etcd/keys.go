package etcd

import (
	"strconv"
	"strings"

	"github.com/distlock/locker/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix is the etcd key prefix under which a Locker keeps its locks
// when neither Config.Prefix nor the URL path names one.
const DefaultPrefix = "locker/"

// escape encodes a stored lock key (any bytes, including '/' and NUL) as a
// single path segment: '%', '/' and NUL become %25, %2F and %00, every other
// byte stays as it is so that keys read naturally in etcdctl. The encoding is
// injective (it can be decoded), and the result never contains '/', which is
// what keeps the key ranges of "a" and "a/b" disjoint: see lockPrefix.
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
// escaped key, and a '/'. Because the escaped key contains no '/', the
// lockPrefix of one key is never a prefix of another key's, so a range read
// over one lock never sees another lock's waiters.
func lockPrefix(prefix, key string) string {
	return prefix + escape(key) + "/"
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

// waiterValue is stored in the waiter key: the acquisition's owner id, which
// also makes a key whose creation is in doubt deletable by its owner only,
// and the owner label for inspection.
func waiterValue(owner driver.OwnerID, label string) string {
	return owner.String() + " " + label
}
