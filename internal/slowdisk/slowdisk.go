// Package slowdisk is a disk whose flushes a test holds up: a FUSE loopback
// that serves a directory of the host and passes every operation on to it,
// but for fsync and fdatasync on files, which take as long as the test says
// or wait until it resumes them. A server in a container bind-mounts the
// mount point as its data directory, and the test stalls its write-ahead log
// the way a failing or saturated disk does (etcd#15247: a leader whose
// fdatasync stalled revoked every lease when it resumed).
//
// Only flushes are held up: writes land in the page cache as on a real disk
// until its dirty limit, which a test of seconds does not reach. A flush of
// a directory is passed on at once.
//
// Mounting needs /dev/fuse and the right to mount (root).
package slowdisk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A Disk is a mounted loopback whose flushes the test controls.
type Disk struct {
	// Dir is the mount point: what a server is given as its data directory.
	Dir string

	srv     *fuse.Server
	flushes atomic.Int64

	mu      sync.Mutex
	delay   time.Duration
	resumed chan struct{} // closed while flushes are not stalled
}

// Mount serves the directory backing at mountpoint (both must exist; the
// mount point empty) until Unmount.
func Mount(backing, mountpoint string) (*Disk, error) {
	d := &Disk{Dir: mountpoint, resumed: make(chan struct{})}
	close(d.resumed)
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("slowdisk: %s: %w", backing, err)
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, d: d}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	srv, err := fs.Mount(mountpoint, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{
		// mount(2) itself, as root, rather than through fusermount; other
		// users (a server's own user in its container) may use it.
		DirectMount: true, AllowOther: true, FsName: "slowdisk", Name: "slowdisk",
	}})
	if err != nil {
		return nil, fmt.Errorf("slowdisk: mount %s on %s: %w", backing, mountpoint, err)
	}
	d.srv = srv
	return d, nil
}

// SetDelay makes every flush take delay longer (0: as long as the backing
// disk's).
func (d *Disk) SetDelay(delay time.Duration) {
	d.mu.Lock()
	d.delay = delay
	d.mu.Unlock()
}

// Stall makes every flush wait until Resume, those under way included once
// their delay has passed.
func (d *Disk) Stall() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.resumed:
		d.resumed = make(chan struct{})
	default: // stalled already
	}
}

// Resume lets the stalled flushes go on, and those that follow.
func (d *Disk) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.resumed:
	default:
		close(d.resumed)
	}
}

// Flushes returns how many file flushes the disk has completed.
func (d *Disk) Flushes() int64 { return d.flushes.Load() }

// Unmount resumes the flushes and unmounts the disk; it fails while a
// process still has a file open on it (remove the server's container first).
func (d *Disk) Unmount() error {
	d.SetDelay(0)
	d.Resume()
	if err := d.srv.Unmount(); err != nil {
		return fmt.Errorf("slowdisk: unmount %s: %w", d.Dir, err)
	}
	return nil
}

// hold waits out the delay and then the stall, or until the flush's
// caller is being killed (then EINTR: the kernel makes a killed process
// wait for the reply to a request the server has read). It does not heed a
// mere INTERRUPT (the request's context ending): a real disk's flush does
// not return EINTR when its thread is signalled, and etcd dies of one
// ("failed to save Raft hard state and entries: interrupted system call");
// Go programs signal their own threads (SIGURG, for preemption).
func (d *Disk) hold(ctx context.Context) syscall.Errno {
	var tid uint32
	if c, ok := fuse.FromContext(ctx); ok {
		tid = c.Pid
	}
	tick := time.NewTicker(killPoll)
	defer tick.Stop()
	d.mu.Lock()
	delay := d.delay
	d.mu.Unlock()
	var delayed <-chan time.Time // nil once the delay is over
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		delayed = t.C
	}
	for {
		var resumed chan struct{} // nil (never ready) during the delay
		if delayed == nil {
			d.mu.Lock()
			resumed = d.resumed
			d.mu.Unlock()
		}
		select {
		case <-delayed:
			delayed = nil
		case <-resumed:
			return 0
		case <-tick.C:
			if dying(tid) {
				return syscall.EINTR
			}
		}
	}
}

// killPoll is how often a held flush looks whether its caller is being
// killed.
const killPoll = 100 * time.Millisecond

// dying reports whether thread tid (a FUSE request's caller, in this
// process's pid namespace) is gone or has SIGKILL pending.
func dying(tid uint32) bool {
	if tid == 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// node is a loopback node whose file flushes go through hold.
type node struct {
	fs.LoopbackNode
	d *Disk
}

var _ fs.NodeFsyncer = (*node)(nil)

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if errno := n.d.hold(ctx); errno != 0 {
		return errno
	}
	if s, ok := f.(fs.FileFsyncer); ok {
		if errno := s.Fsync(ctx, flags); errno != 0 {
			return errno
		}
	}
	n.d.flushes.Add(1)
	return 0
}
