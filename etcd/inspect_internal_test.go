package etcd

import (
	"testing"

	"github.com/distlock/locker/driver"
)

// TestLockTTLOf: the lock TTL read back from a shared lease's granted TTL
// is the one the lease was granted for, and a lease the server granted
// longer than asked is read as a TTL it covers.
func TestLockTTLOf(t *testing.T) {
	for secs := int64(1); secs <= 100_000; secs++ {
		lease := secs + reserve(secs)
		if got := lockTTLOf(lease); got != secs {
			t.Fatalf("lockTTLOf(%d) = %d, want %d", lease, got, secs)
		}
		if got := lockTTLOf(lease + 1); got < secs || got+reserve(got) > lease+1 {
			t.Fatalf("lockTTLOf(%d) = %d: not the longest TTL such a lease covers", lease+1, got)
		}
	}
}

// FuzzRecord: a waiter key's record gives back its label, value and limit,
// and a plain lock's record without a value keeps the layout of the
// versions before values.
func FuzzRecord(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"worker 1", ""}, {"", "v"}, {"a b", "c d"}, {"+3 x", "\x00"}} {
		f.Add(s[0], s[1], uint8(1))
		f.Add(s[0], s[1], uint8(3))
	}
	f.Fuzz(func(t *testing.T, label, value string, limit uint8) {
		r := record{owner: driver.NewOwnerID(), limit: max(int(limit), 1), label: label, value: value}
		enc := r.encode()
		if value == "" && r.limit == 1 && enc != r.owner.String()+" "+label {
			t.Fatalf("record without a value encoded as %q, not in the old layout", enc)
		}
		got, ok := decodeRecord(enc)
		if !ok || got.label != label || got.value != value || got.limit != r.limit {
			t.Fatalf("decodeRecord(%q) = %+v, %v; want %q, %q, limit %d", enc, got, ok, label, value, r.limit)
		}
	})
}
