package zookeeper

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/internal/testenv"
)

// TestValidateRoot_AgreesWithTheServer sends creates of paths with the
// characters at the edges of what ZooKeeper refuses in a multi (which
// go-zookeeper sends without checking paths itself), and checks that
// validateRoot accepts exactly the roots the server accepts. Issue 15, item
// 11: it accepted U+D800–U+F8FF, which the server refuses.
func TestValidateRoot_AgreesWithTheServer(t *testing.T) {
	conn, _, err := zk.Connect([]string{testenv.ZooKeeper(t).Addr()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	base := fmt.Sprintf("/locker-test-chars-%d", time.Now().UnixNano())
	if _, err := conn.Create(base, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"\x01", "\x1f", " ", "~", "\x7f", "\u0080", "\u009f", "\u00a0", "é",
		"\ud7ff", "\ue000", "\uefff", "\uf000", "\uf8ff", "\uf900", "\uffef",
		"\ufff0", "\ufffd", "\uffff", "\U00010000", "😀", "\U0010ffff", "\xff", "a\xc3",
	} {
		p := base + "/x" + s + "y"
		_, err := conn.Multi(&zk.CreateRequest{Path: p, Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent})
		switch {
		case err == nil:
			_ = conn.Delete(p, -1)
		case !errors.Is(err, zk.ErrBadArguments) && !errors.Is(err, zk.ErrInvalidPath):
			t.Fatalf("create %q: %v", p, err)
		}
		serverOK := err == nil
		if ours := validateRoot(p) == nil; ours != serverOK {
			t.Errorf("root with %q (%U): validateRoot accepts = %v, the server accepts = %v (%v)", s, []rune(s), ours, serverOK, err)
		}
	}
}
