package etcd

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzEscape checks the key encoding in the process, where a fuzzer can run
// it millions of times (internal/reliability fuzzes it through a server, a
// few thousand times): for any two stored keys (any bytes, NUL included, as
// the namespace separator is), the escaped key is one path segment that
// decodes back to the key, and the range of one lock's waiter keys neither
// equals nor contains the range of another's ("a" and "a/b" stay apart).
func FuzzEscape(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "b"}, {"a", "a/b"}, {"a/", "a%2F"}, {"%", "%25"}, {"ns\x00k", "ns%00k"},
		{"..", "."}, {"ключ", "键"}, {"a/b/c", "a/b"}, {"\xff", "%FF"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if k1 == "" || k2 == "" {
			return // stored keys are never empty: the root refuses empty keys
		}
		for _, k := range []string{k1, k2} {
			e := escape(k)
			if strings.ContainsAny(e, "/\x00") {
				t.Fatalf("escape(%q) = %q holds '/' or NUL", k, e)
			}
			if d, err := unescape(e); err != nil || d != k {
				t.Fatalf("escape(%q) = %q decodes to %q (%v)", k, e, d, err)
			}
		}
		if k1 == k2 {
			return
		}
		p1, p2 := lockPrefix(DefaultPrefix, k1), lockPrefix(DefaultPrefix, k2)
		if strings.HasPrefix(p1, p2) || strings.HasPrefix(p2, p1) {
			t.Fatalf("keys %q and %q have nested ranges %q and %q", k1, k2, p1, p2)
		}
	})
}

// unescape inverts escape: it is how the test knows escape loses nothing.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", strconv.ErrSyntax
		}
		c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}
