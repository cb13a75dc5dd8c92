// Package opencheck holds what the fuzz targets of locker.Open check of
// every outcome, whichever schemes they fuzz: the root package's target and
// the per-backend targets of internal/reliability.
package opencheck

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/distlock/locker"
)

// Outcome fails t unless Open(raw) returned a Locker or an error, never
// both and never neither; the error is one of classes (errors.Is); and it
// does not repeat the URL's password. Closing a returned Locker is the
// caller's.
func Outcome(t testing.TB, raw string, l locker.Locker, err error, classes ...error) {
	t.Helper()
	switch {
	case err == nil && l == nil:
		t.Fatalf("Open(%q) = nil, nil", raw)
	case err == nil:
		return
	case l != nil:
		t.Fatalf("Open(%q) returned a Locker and the error %v", raw, err)
	}
	if !isAny(err, classes) {
		t.Fatalf("Open(%q) = %v, want one of %v", raw, err, classes)
	}
	if p := Password(raw); p != "" && strings.Contains(err.Error(), p) {
		t.Fatalf("Open(%q): error %q repeats the password", raw, err)
	}
}

func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Password returns the URL's password when it is long and plain enough to
// recognise in a message and appears nowhere else in the URL; else "".
func Password(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, ok := u.User.Password()
	if !ok || len(p) < 6 || strings.Count(raw, p) != 1 {
		return ""
	}
	for _, c := range p {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return p
}
