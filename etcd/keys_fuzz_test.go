package etcd

import (
	"strings"
	"testing"
)

// FuzzKeyLayout checks the key layout in the process, where a fuzzer can
// run it millions of times (internal/reliability fuzzes keys through a
// server, a few thousand times): for any two Lockers' prefixes and stored
// keys (any bytes, NUL included, as the namespace separator is), the escaped
// key is one path segment that decodes back to the key, the range of one
// lock's waiter keys neither equals nor contains the range of another's
// ("a" and "a/b" stay apart, and so do prefix P/ with key "k" and prefix
// P/k/ with any key), and no tombstone lies in any lock's range.
func FuzzKeyLayout(f *testing.F) {
	for _, s := range [][4]string{
		{"", "a", "", "b"}, {"", "a", "", "a/b"}, {"", "a/", "", "a%2F"}, {"", "%", "", "%25"},
		{"", "ns\x00k", "", "ns%00k"}, {"", "..", "", "."}, {"", "ключ", "", "键"}, {"", "a/b/c", "", "a/b"},
		{"", "\xff", "", "%FF"}, {"P/", "k", "P/k/", "anything"}, {"P", "k", "P/k", "x"}, {"a/", "b", "a/b", "c"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, p1, k1, p2, k2 string) {
		if k1 == "" || k2 == "" {
			return // stored keys are never empty: the root refuses empty keys
		}
		p1, err1 := normalizePrefix(p1)
		p2, err2 := normalizePrefix(p2)
		if err1 != nil || err2 != nil {
			return // a Locker with such a prefix is refused
		}
		for _, k := range []string{k1, k2} {
			e := escape(k)
			if strings.ContainsAny(e, "/\x00") {
				t.Fatalf("escape(%q) = %q holds '/' or NUL", k, e)
			}
			if d, ok := unescape(e); !ok || d != k {
				t.Fatalf("escape(%q) = %q decodes to %q (%v)", k, e, d, ok)
			}
		}
		r1, r2 := lockPrefix(p1, k1), lockPrefix(p2, k2)
		w1, w2 := waiterKey(r1, 1, 0), waiterKey(r2, 2, 0)
		for _, tomb := range []string{tombstoneKey(p1, w1), tombstoneKey(p2, w2)} {
			if strings.HasPrefix(tomb, r1) || strings.HasPrefix(tomb, r2) {
				t.Fatalf("tombstone %q lies in a lock range (%q, %q)", tomb, r1, r2)
			}
		}
		if p1 == p2 && k1 == k2 {
			return
		}
		if strings.HasPrefix(r1, r2) || strings.HasPrefix(r2, r1) {
			t.Fatalf("(%q, %q) and (%q, %q) have nested ranges %q and %q", p1, k1, p2, k2, r1, r2)
		}
	})
}
