package locker

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that every backend accepts. The same
// bound applies to a namespace.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a valid lock key: valid UTF-8 of 1 to
// MaxKeyLen bytes without NUL. The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidKey)
	}
	return nil
}

// storedKey is the name a backend stores: the key itself, or the namespace,
// a NUL and the key. NUL is in no valid key or namespace, so the two forms
// never collide and no namespace/key split is ambiguous.
func storedKey(namespace, key string) string {
	if namespace == "" {
		return key
	}
	return namespace + "\x00" + key
}
