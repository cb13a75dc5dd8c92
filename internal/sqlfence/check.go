// Package sqlfence holds what the SQL fencing guards (postgres.Guard over
// pgx, package fencing/sqlguard over database/sql) share.
package sqlfence

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// Check refuses, before any statement, what a fence row cannot hold: a
// resource that is empty, not UTF-8 or holds a NUL (locker.ErrInvalidKey);
// token 0, which no lock hands out (fencing.ErrStaleToken, as
// fencing.Memory refuses it); and a token above the largest signed 64-bit
// integer, a bigint's range (errRange, the guard's own sentinel). who
// starts the message ("postgres: guard").
func Check(who, resource string, token uint64, errRange error) error {
	switch {
	case resource == "" || !utf8.ValidString(resource) || strings.IndexByte(resource, 0) >= 0:
		return fmt.Errorf("%w: %s: resource %q must be non-empty UTF-8 without NUL", locker.ErrInvalidKey, who, resource)
	case token == 0:
		return fmt.Errorf("%w: resource %q: token 0", fencing.ErrStaleToken, resource)
	case token > math.MaxInt64:
		return fmt.Errorf("%w: resource %q: token %d", errRange, resource, token)
	}
	return nil
}
