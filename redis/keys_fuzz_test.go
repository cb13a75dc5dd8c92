package redis

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzNames checks the key encoding in the process, where a fuzzer can run
// it millions of times (internal/reliability fuzzes it through a server, a
// few thousand times): for any two stored keys (any bytes, NUL included,
// as the namespace separator is), every Redis name of one lock carries the
// whole encoded key as its Cluster hash tag, so all of them share a slot,
// and no name of one lock equals a name of another.
func FuzzNames(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "b"}, {"a", "a/b"}, {"{a}", "a"}, {"}", "{"}, {"ns\x00k", "ns\x00\x00k"},
		{"..", "."}, {"ключ", "键"}, {"a:lock", "a"}, {"x}:lock", "x"},
	} {
		f.Add(s[0], s[1])
	}
	b := &base{prefix: DefaultPrefix}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if k1 == "" || k2 == "" {
			return // stored keys are never empty: the root refuses empty keys
		}
		n1, n2 := b.names(k1), b.names(k2)
		for _, n := range []names{n1, n2} {
			if strings.ContainsAny(n.tag, "{}") {
				t.Fatalf("encoded key %q holds a brace", n.tag)
			}
			keys := keyNames(n)
			for i, name := range keys {
				if !strings.HasPrefix(name, b.prefix) {
					t.Fatalf("name %q lacks the prefix %q", name, b.prefix)
				}
				if tag := hashTag(name); tag != n.tag {
					t.Fatalf("name %q has hash tag %q, want the encoded key %q", name, tag, n.tag)
				}
				for _, other := range keys[i+1:] {
					if name == other {
						t.Fatalf("one lock has the name %q twice", name)
					}
				}
			}
		}
		if k1 == k2 {
			return
		}
		if n1.tag == n2.tag {
			t.Fatalf("keys %q and %q share the encoding %q", k1, k2, n1.tag)
		}
		for _, a := range keyNames(n1) {
			for _, c := range keyNames(n2) {
				if a == c {
					t.Fatalf("keys %q and %q share the name %q", k1, k2, a)
				}
			}
		}
	})
}

// keyNames lists every Redis key name of n: every string field but the tag,
// so that a name added later is checked too.
func keyNames(n names) []string {
	var out []string
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		if v.Type().Field(i).Name != "tag" && v.Field(i).Kind() == reflect.String {
			out = append(out, v.Field(i).String())
		}
	}
	return out
}

// hashTag is the part of a key name Redis Cluster hashes: the text between
// the first '{' and the first '}' after it, when not empty; else the name.
func hashTag(name string) string {
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return name
	}
	j := strings.IndexByte(name[i+1:], '}')
	if j <= 0 {
		return name
	}
	return name[i+1 : i+1+j]
}

// TestNames pins the names of one lock.
func TestNames(t *testing.T) {
	b := base{prefix: "p:"}
	got := b.names("a/b")
	want := names{tag: "YS9i", lock: "p:{YS9i}:lock", fence: "p:{YS9i}:fence", queue: "p:{YS9i}:q", deadlines: "p:{YS9i}:qd",
		events: "p:{YS9i}:ev", sem: "p:{YS9i}:sem", sinfo: "p:{YS9i}:si"}
	if got != want {
		t.Fatalf("names(%q) = %+v, want %+v", "a/b", got, want)
	}
}
