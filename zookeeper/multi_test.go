package zookeeper_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// TestMultiCreate_DirectoryStatNamesTheCreate proves, on the real server, what
// the package relies on: a multi of (create an ephemeral sequential child,
// set the directory's data) is one transaction, so the directory's stat in
// its reply has the created node's czxid as Mzxid, and counts the children
// as of that transaction — in a fresh container directory, a reused one, and
// one with an older child.
func TestMultiCreate_DirectoryStatNamesTheCreate(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	root := freshRoot(t)
	c := rawConn(t, addr, nil)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/locker-test", root} {
		if _, err := c.Create(p, nil, zk.FlagPersistent, acl); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	dir := root + "/d"
	if _, err := c.CreateContainer(dir, nil, zk.FlagContainer, acl); err != nil {
		t.Fatal(err)
	}
	create := func() (string, *zk.Stat) {
		t.Helper()
		rs, err := c.Multi(&zk.CreateRequest{Path: dir + "/n-", Acl: acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: dir, Version: -1})
		if err != nil {
			t.Fatalf("multi: %v", err)
		}
		_, st, err := c.Exists(rs[0].String)
		if err != nil {
			t.Fatal(err)
		}
		if rs[1].Stat.Mzxid != st.Czxid {
			t.Fatalf("directory Mzxid %#x, created node's czxid %#x: want equal", rs[1].Stat.Mzxid, st.Czxid)
		}
		return rs[0].String, rs[1].Stat
	}
	first, st := create() // fresh directory
	if st.NumChildren != 1 {
		t.Fatalf("first child: directory has %d children, want 1", st.NumChildren)
	}
	second, st := create() // an older child is there
	if st.NumChildren != 2 {
		t.Fatalf("second child: directory has %d children, want 2", st.NumChildren)
	}
	for _, p := range []string{first, second} {
		if err := c.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, st = create(); st.NumChildren != 1 { // reused directory
		t.Fatalf("reused directory: %d children, want 1", st.NumChildren)
	}
	_, err := c.Multi(&zk.CreateRequest{Path: root + "/missing/n-", Acl: acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: root + "/missing", Version: -1})
	if err != zk.ErrNoNode {
		t.Fatalf("multi in a missing directory: %v, want ErrNoNode", err)
	}
}

// ownNode returns the stat of the one node in key's queue, read with a plain
// client.
func ownNode(t *testing.T, c *zk.Conn, root, key string) *zk.Stat {
	t.Helper()
	dir := lockDir(root, key)
	kids, _, err := c.Children(dir)
	if err != nil || len(kids) != 1 {
		t.Fatalf("queue of %q: %v, %v; want one node", key, kids, err)
	}
	_, st, err := c.Exists(dir + "/" + kids[0])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestToken_IsOwnNodeCzxid: the token of a lease is its node's czxid, read by
// a plain client: for a fresh key (its directory created on the way), a
// reused one, a grant after a wait, and with an ACL that does not let the
// Locker write a directory's data (the create is then sent alone).
func TestToken_IsOwnNodeCzxid(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	c := rawConn(t, addr, nil)
	for _, tc := range []struct {
		name string
		acl  []zk.ACL
		// writes: the directory's data version after two acquisitions: each
		// writes it in its create's multi, unless the ACL forbids it.
		writes int32
	}{
		{"default ACL", nil, 2},
		{"ACL without write", zk.WorldACL(zk.PermAll &^ zk.PermWrite), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := freshRoot(t)
			ctx := ctxT(t, 30*time.Second)
			var opts []locker.Option
			if tc.acl != nil {
				opts = append(opts, zookeeper.WithACL(tc.acl))
			}
			l, err := locker.Open(ctx, zkURL(addr, root), opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			other := dial(t, addr, root, locker.WithTTL(testTTL))
			for _, step := range []string{"fresh key", "reused key"} {
				lease, err := l.Acquire(ctx, "k")
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if st := ownNode(t, c, root, "k"); lease.Token() != uint64(st.Czxid) {
					t.Fatalf("%s: token %#x, own node's czxid %#x", step, lease.Token(), st.Czxid)
				}
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			_, dirSt, err := c.Exists(lockDir(root, "k"))
			if err != nil {
				t.Fatal(err)
			}
			if dirSt.Version != tc.writes {
				t.Fatalf("directory data version %d, want %d", dirSt.Version, tc.writes)
			}
			// A grant after a wait.
			holder, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan locker.Lease, 1)
			go func() {
				lease, err := other.Acquire(ctx, "k")
				if err != nil {
					t.Error(err)
				}
				got <- lease
			}()
			waitQueue(t, c, lockDir(root, "k"), 2)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			next := <-got
			if next == nil {
				t.FailNow()
			}
			if st := ownNode(t, c, root, "k"); next.Token() != uint64(st.Czxid) || next.Token() <= holder.Token() {
				t.Fatalf("after a wait: token %#x (previous %#x), own node's czxid %#x", next.Token(), holder.Token(), st.Czxid)
			}
			_ = next.Release(ctx)
		})
	}
}
