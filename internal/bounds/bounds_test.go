package bounds_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock/locker/internal/bounds"
)

func TestTook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bounds")
	t.Setenv(bounds.Env, path)
	bounds.Took(t, "at half", 5*time.Second, 10*time.Second) // not over half: no line
	bounds.Took(t, "over half", 7500*time.Millisecond, 10*time.Second)
	bounds.Took(t, "over the bound", 12*time.Second, 10*time.Second)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "internal/bounds TestTook | over half | took 7.5s of 10s (75%)\n" +
		"internal/bounds TestTook | over the bound | took 12s of 10s (120%)\n"
	if string(got) != want {
		t.Fatalf("written:\n%s\nwant:\n%s", got, want)
	}
}

func TestTookUnset(t *testing.T) {
	t.Setenv(bounds.Env, "")
	dir := t.TempDir()
	t.Chdir(dir)
	bounds.Took(t, "over half", 9*time.Second, 10*time.Second)
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("with %s unset: %v written, err %v; want nothing", bounds.Env, entries, err)
	}
}

func TestTookUnwritable(t *testing.T) {
	t.Setenv(bounds.Env, filepath.Join(t.TempDir(), "missing", "bounds"))
	bounds.Took(t, "over half", 9*time.Second, 10*time.Second) // logged, the test goes on
}
