package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/opencheck"
	_ "github.com/distlock/locker/memory"
)

// FuzzValidateKey: ValidateKey accepts exactly the keys of the contract —
// valid UTF-8 of 1 to MaxKeyLen bytes without NUL — and refuses the rest
// with ErrInvalidKey.
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{"", "a", "a/b", "..", "\x00", "a\x00b", "\xff", "\xed\xa0\x80",
		"é", "💥", `'; DROP TABLE locks; --`, "{tag}", "%00", strings.Repeat("x", locker.MaxKeyLen),
		strings.Repeat("x", locker.MaxKeyLen+1), strings.Repeat("é", locker.MaxKeyLen/2)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := locker.ValidateKey(key)
		want := key != "" && len(key) <= locker.MaxKeyLen && utf8.ValidString(key) && !strings.ContainsRune(key, 0)
		switch {
		case want && err != nil:
			t.Fatalf("ValidateKey(%q) = %v, want nil", key, err)
		case !want && !errors.Is(err, locker.ErrInvalidKey):
			t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}
	})
}

// FuzzOpenURL: Open never panics on any string; it either opens a Locker
// or fails with ErrInvalidURL, ErrInvalidOption or ErrUnavailable; and it
// never repeats a URL's password in its error.
func FuzzOpenURL(f *testing.F) {
	for _, u := range []string{"", "memory://", "memory://name", "MEMORY://Name", "memory:", "memory:opaque",
		"memory://x?ttl=30s&namespace=ns&owner=me", "memory://x?ttl=soon", "memory://x?ttl=-1s", "memory://x?ttl=1ns",
		"memory://x?namespace=a%00b", "memory://x/path", "memory://x:1", "memory://u:secret99@x", "memory://x?%zz",
		"memory://%zz", "memory://[::1]", "memory://x?owner=" + strings.Repeat("o", 1100), "redis://h:6379/0",
		"nosuch://user:hunter22@host/?ttl=1s", "://", "\x7f", "memory://x#frag", "memory://x?ttl=1h&ttl=2s"} {
		f.Add(u)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw string) {
		l, err := locker.Open(ctx, raw)
		opencheck.Outcome(t, raw, l, err, locker.ErrInvalidURL, locker.ErrInvalidOption, locker.ErrUnavailable)
		if l != nil {
			if err := l.Close(); err != nil {
				t.Fatalf("Open(%q): Close = %v", raw, err)
			}
		}
	})
}
