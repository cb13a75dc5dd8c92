package zookeeper_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/internal/testenv"
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
