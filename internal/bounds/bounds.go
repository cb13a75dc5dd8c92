// Package bounds records how close a test's timed wait came to its bound.
// When LOCKER_BOUNDS_FILE is set (scripts/test sets it), Took appends a
// line for every wait that took more than half its bound, so that CI can
// report the tests a loaded machine pushes toward failure before they fail.
// Unset, it does nothing; it never fails a test.
package bounds

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Env names the file the lines are appended to.
const Env = "LOCKER_BOUNDS_FILE"

// Took records that what took took of bound, if that is over half of it.
func Took(t testing.TB, what string, took, bound time.Duration) {
	path := os.Getenv(Env)
	if path == "" || bound <= 0 || took <= bound/2 {
		return
	}
	line := fmt.Sprintf("%s %s | %s | took %v of %v (%d%%)\n", pkg(), t.Name(), what,
		took.Round(time.Millisecond), bound, int64(100*float64(took)/float64(bound)))
	// O_APPEND and one write per line: lines from concurrent test binaries
	// do not interleave. A failure to record is logged, never fatal.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Logf("bounds: %v", err)
	}
}

// pkg names the test's package by its directory under the module root (a
// test binary runs in its package's directory): every backend has a
// TestConformance, and the line must say whose.
func pkg() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}
