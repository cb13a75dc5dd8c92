package locker

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzStoredKey: distinct (namespace, key) pairs map to distinct stored
// names — the name a backend stores, which it may encode further but never
// merge — and the pair can be read back from the name, so no split is
// ambiguous. Stored names are valid UTF-8 of at most 2×MaxKeyLen+1 bytes,
// as package driver promises backends.
func FuzzStoredKey(f *testing.F) {
	f.Add("", "a", "", "a")
	f.Add("", "a/b", "a", "b")
	f.Add("ns", "k", "", "ns\x00k")
	f.Add("a", "b/c", "a/b", "c")
	f.Add("a\x00b", "c", "a", "b\x00c")
	f.Add("é", "x", "\xc3", "\xa9x")
	f.Add(strings.Repeat("n", MaxKeyLen), strings.Repeat("k", MaxKeyLen), "", "k")
	f.Fuzz(func(t *testing.T, ns1, k1, ns2, k2 string) {
		if !validPair(ns1, k1) || !validPair(ns2, k2) {
			return
		}
		s1, s2 := storedKey(ns1, k1), storedKey(ns2, k2)
		if (ns1 != ns2 || k1 != k2) && s1 == s2 {
			t.Fatalf("(%q, %q) and (%q, %q) both store as %q", ns1, k1, ns2, k2, s1)
		}
		for _, c := range []struct{ ns, k, s string }{{ns1, k1, s1}, {ns2, k2, s2}} {
			if !utf8.ValidString(c.s) || len(c.s) > 2*MaxKeyLen+1 {
				t.Fatalf("storedKey(%q, %q) = %q: not valid UTF-8 of at most %d bytes", c.ns, c.k, c.s, 2*MaxKeyLen+1)
			}
			ns, k, _ := strings.Cut(c.s, "\x00")
			if !strings.Contains(c.s, "\x00") {
				ns, k = "", c.s
			}
			if ns != c.ns || k != c.k {
				t.Fatalf("storedKey(%q, %q) = %q reads back as (%q, %q)", c.ns, c.k, c.s, ns, k)
			}
		}
	})
}

// validPair reports whether a Locker accepts namespace ns ("" for none)
// and key k.
func validPair(ns, k string) bool {
	return ValidateKey(k) == nil && (ns == "" || ValidateKey(ns) == nil)
}
