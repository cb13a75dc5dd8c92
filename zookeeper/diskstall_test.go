package zookeeper_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/internal/holdtest"
	"github.com/distlock/locker/internal/testenv"
)

// TestDiskStall_HolderAndServerAgreeOnWhoHolds: the server's disk stalls for
// three session timeouts while A holds and B waits, and a write waiting for
// the disk holds up every request after it in the server's pipeline, pings
// and syncs included. Whatever ZooKeeper makes of it — A's session may live
// on or expire — B is granted the lock only after A's lease has ended, with
// a larger token. (A's client may resume its session on a new connection,
// where go-zookeeper races with itself: see scripts/test.)
func TestDiskStall_HolderAndServerAgreeOnWhoHolds(t *testing.T) {
	s, disk := testenv.ZooKeeperOnSlowDisk(t)
	servers, root := []string{s.Addr()}, freshRoot(t)
	raw := rawConn(t, servers, nil)
	held := holdtest.Check(t, holdtest.Scenario{
		A: dial(t, servers, root), B: dial(t, servers, root), Key: "k",
		Queued: func(t *testing.T) { waitQueue(t, raw, lockDir(root, "k"), 2) },
		Fault: func(*testing.T) {
			disk.Stall()
			go func() { _, _ = raw.Create(root+"-write", nil, 0, zk.WorldACL(zk.PermAll)) }()
			time.Sleep(3 * testTTL)
			disk.Resume()
		},
	})
	t.Logf("A's lease: %v", held.Err())
}
