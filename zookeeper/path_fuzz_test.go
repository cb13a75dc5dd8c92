package zookeeper

import (
	"strings"
	"testing"
)

// FuzzDir checks the key encoding in the process, where a fuzzer can run it
// millions of times (internal/reliability fuzzes it through a server, a few
// thousand times): for any two stored keys (any bytes, NUL included, as the
// namespace separator is), a lock's directory is one segment under the root
// made only of characters ZooKeeper accepts in a path, never "." or "..",
// and distinct keys get distinct directories.
func FuzzDir(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "b"}, {"a", "a/b"}, {"..", "."}, {"ns\x00k", "ns\x00\x00k"}, {"/", "//"},
		{"ключ", "键"}, {"\uffff", "\ud7ff"}, {"zookeeper", "a\x7fb"},
	} {
		f.Add(s[0], s[1])
	}
	b := &backend{root: "/locker"}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if k1 == "" || k2 == "" {
			return // stored keys are never empty: the root refuses empty keys
		}
		for _, k := range []string{k1, k2} {
			d := b.dir(k)
			seg, ok := strings.CutPrefix(d, b.root+"/")
			if !ok {
				t.Fatalf("dir(%q) = %q is not under %q", k, d, b.root)
			}
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("dir(%q) = %q: segment %q", k, d, seg)
			}
			if i := strings.IndexFunc(seg, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
			}); i >= 0 {
				t.Fatalf("dir(%q) = %q: segment holds %q", k, d, seg[i:])
			}
		}
		if k1 != k2 && b.dir(k1) == b.dir(k2) {
			t.Fatalf("keys %q and %q share the directory %q", k1, k2, b.dir(k1))
		}
	})
}
