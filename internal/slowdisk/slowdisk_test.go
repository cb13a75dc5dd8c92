package slowdisk_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distlock/locker/internal/slowdisk"
)

// mount mounts a Disk for the test, or skips it on a machine that cannot
// (no /dev/fuse, not root) — unless CI is set: CI's machines can, and the
// fault tests need it there.
func mount(t *testing.T) (*slowdisk.Disk, string) {
	t.Helper()
	backing, mnt := t.TempDir(), t.TempDir()
	d, err := slowdisk.Mount(backing, mnt)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := d.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return d, backing
}

// flush writes to a new file on the disk and flushes it, in the background;
// the channel yields the flush's error.
func flush(t *testing.T, d *slowdisk.Disk, name string) <-chan error {
	t.Helper()
	f, err := os.Create(filepath.Join(d.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString("entry"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	return done
}

func TestDisk_PassesOperationsOnAndDelaysFlushes(t *testing.T) {
	d, backing := mount(t)
	const delay = 300 * time.Millisecond
	d.SetDelay(delay)
	start := time.Now()
	if err := <-flush(t, d, "wal"); err != nil {
		t.Fatalf("fsync on the slow disk: %v", err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("fsync with a %v delay returned after %v", delay, took)
	}
	if got := d.Flushes(); got != 1 {
		t.Errorf("Flushes() = %d after one fsync, want 1", got)
	}
	b, err := os.ReadFile(filepath.Join(backing, "wal"))
	if err != nil || string(b) != "entry" {
		t.Errorf("the backing directory holds %q, %v; want what was written through the disk", b, err)
	}
}

func TestDisk_StalledFlushWaitsForResume(t *testing.T) {
	d, _ := mount(t)
	d.Stall()
	done := flush(t, d, "wal")
	select {
	case err := <-done:
		t.Fatalf("fsync on a stalled disk returned (%v) before Resume", err)
	case <-time.After(500 * time.Millisecond):
	}
	if got := d.Flushes(); got != 0 {
		t.Errorf("Flushes() = %d while the only fsync is stalled, want 0", got)
	}
	d.Resume()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stalled fsync after Resume: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stalled fsync did not return within a minute of Resume")
	}
	if got := d.Flushes(); got != 1 {
		t.Errorf("Flushes() = %d after Resume, want 1", got)
	}
}
