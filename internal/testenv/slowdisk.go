package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/slowdisk"
)

// EtcdOnSlowDisk starts an etcd 3.6 single member private to the calling
// test whose data directory (its write-ahead log and database) is on a
// slowdisk.Disk: the test slows down or stalls the member's fdatasyncs.
func EtcdOnSlowDisk(t testing.TB) (*Server, *slowdisk.Disk) {
	t.Helper()
	return onSlowDisk(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img Images, port int) launch.Spec {
		return launch.EtcdSingle(img.Etcd, nil, port)
	})
}

// ZooKeeperOnSlowDisk starts a standalone ZooKeeper 3.8 private to the
// calling test, configured as the shared one, whose data directory (its
// transaction log and snapshots) is on a slowdisk.Disk.
func ZooKeeperOnSlowDisk(t testing.TB) (*Server, *slowdisk.Disk) {
	t.Helper()
	return onSlowDisk(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
		return zkSpec(img, port, 1, "")
	})
}

// onSlowDisk mounts a slow disk and starts the server mk makes with the disk
// as its /data.
func onSlowDisk(t testing.TB, kind, envVar string, mk func(img Images, port int) launch.Spec) (*Server, *slowdisk.Disk) {
	t.Helper()
	d := mountSlowDisks(t, 1)[0]
	s := Private(t, kind, envVar, func(img Images, port int) launch.Spec {
		sp := mk(img, port)
		onDisk(&sp, d)
		return sp
	})
	return s, d
}

// mountSlowDisks mounts n slow disks, unmounted at t.Cleanup — after the
// containers that use them are removed, when those are started after this
// call (t.Cleanup runs last-registered first).
func mountSlowDisks(t testing.TB, n int) []*slowdisk.Disk {
	t.Helper()
	disks := make([]*slowdisk.Disk, n)
	for i := range disks {
		d, err := slowdisk.Mount(t.TempDir(), t.TempDir())
		if err != nil {
			unavailable(t, "%v (a slow disk needs /dev/fuse and the right to mount)", err)
		}
		t.Cleanup(func() {
			if err := d.Unmount(); err != nil {
				t.Errorf("testenv: %v", err)
			}
		})
		disks[i] = d
	}
	return disks
}

// onDisk makes d the data directory (/data) of the server sp runs.
func onDisk(sp *launch.Spec, d *slowdisk.Disk) { sp.Binds = append(sp.Binds, d.Dir+":/data") }

// empty removes everything on d, whose server is gone, for a fresh one: a
// replaced machine's new disk, as slow as the old one.
func empty(d *slowdisk.Disk) error {
	entries, err := os.ReadDir(d.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(d.Dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
