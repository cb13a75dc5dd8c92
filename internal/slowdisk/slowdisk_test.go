package slowdisk_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
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

// A flush is not cut short by a signal its thread receives: a real disk's
// fdatasync does not return EINTR, and etcd treats one as fatal ("failed to
// save Raft hard state and entries: interrupted system call": members of a
// soak's etcd cluster died of it, 2026-12-03). The kernel turns a signal to
// a thread waiting on FUSE into an INTERRUPT request, and Go programs signal
// their own threads (SIGURG, for preemption).
func TestDisk_StalledFlushIgnoresSignals(t *testing.T) {
	d, _ := mount(t)
	f, err := os.Create(filepath.Join(d.Dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("entry"); err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	d.Stall()
	tid := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		// The thread stays this goroutine's, so that the signals reach the
		// thread waiting in fdatasync.
		runtime.LockOSThread()
		tid <- syscall.Gettid()
		done <- syscall.Fdatasync(fd)
	}()
	id := <-tid
	for range 20 {
		time.Sleep(20 * time.Millisecond)
		if err := syscall.Tgkill(os.Getpid(), id, syscall.SIGURG); err != nil {
			// The locked thread ends with its goroutine: fdatasync returned.
			t.Fatalf("fdatasync on a stalled disk returned before Resume: %v (signal: %v)", <-done, err)
		}
		select {
		case err := <-done:
			t.Fatalf("fdatasync on a stalled disk returned before Resume: %v", err)
		default:
		}
	}
	d.Resume()
	if err := <-done; err != nil {
		t.Fatalf("fdatasync after Resume: %v", err)
	}
}

// A process killed while its flush is stalled dies without waiting for the
// stall to end: the kernel would otherwise hold it until the reply, and a
// server's container could not be removed while its disk stalls.
func TestDisk_StalledFlushLetsAKilledProcessGo(t *testing.T) {
	d, _ := mount(t)
	name := filepath.Join(d.Dir, "wal")
	if err := os.WriteFile(name, []byte("entry"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Stall()
	defer d.Resume()
	cmd := exec.Command("sync", "--data", name) // fdatasync(2) on the file
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Until its flush is held: the process waits in fdatasync.
	for !inFlush(cmd.Process.Pid) {
		select {
		case err := <-exited:
			t.Fatalf("sync exited before the stall ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("a killed process stayed in its stalled flush")
	}
}

// inFlush reports whether process pid is blocked in fdatasync or fsync
// (/proc/pid/syscall starts with the number of the call it waits in).
func inFlush(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return false
	}
	n, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	return n == strconv.Itoa(syscall.SYS_FDATASYNC) || n == strconv.Itoa(syscall.SYS_FSYNC)
}
