package etcd

import (
	"strings"

	"github.com/distlock/locker/driver"
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

// waiterKey is the etcd key of one acquisition: the lock's prefix and the
// owner id. The owner id is random per acquisition, so two acquisitions
// never share an etcd key, even when they share a lease (the shared-session
// bug of concurrency.Mutex, whose key is the prefix and the lease id), and an
// acquisition whose outcome is unknown can be found again and removed by
// name.
func waiterKey(prefix string, owner driver.OwnerID) string {
	return prefix + owner.String()
}
