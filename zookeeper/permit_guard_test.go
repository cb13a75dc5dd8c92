package zookeeper_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/guardtest"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// permitWriter writes the token into a node of the harness's root through
// a PermitGuard on a connection of its own.
func permitWriter(t *testing.T, h *harness) (guardtest.Write, *zk.Conn) {
	c := rawConn(t, h.servers, nil)
	g, err := zookeeper.NewPermitGuard(c, zookeeper.WithPermitGuardRoot(h.root))
	if err != nil {
		t.Fatal(err)
	}
	state := h.root + "-state"
	for _, p := range []string{"/locker-test", state} {
		if _, err := c.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	return func(_ context.Context, key string, token uint64) error {
		_, err := g.Write(context.Background(), key, token,
			&zk.SetDataRequest{Path: state, Data: binary.BigEndian.AppendUint64(nil, token), Version: -1})
		return err
	}, c
}

func TestPermitGuard_AdmitsLivePermits_RefusesReleasedAndLost(t *testing.T) {
	h := newHarness(t, 2*time.Second, []string{testenv.ZooKeeper(t).Addr()})
	write, _ := permitWriter(t, h)
	guardtest.Permits(t, h, "job", write)
}

func TestPermitGuard_PlainLock_AsTodaysGuard(t *testing.T) {
	h := newHarness(t, 2*time.Second, []string{testenv.ZooKeeper(t).Addr()})
	write, c := permitWriter(t, h)
	today, err := zookeeper.NewGuard(c, zookeeper.WithGuardRoot(h.root+"-fences"))
	if err != nil {
		t.Fatal(err)
	}
	guardtest.PlainLock(t, h, "job", write, func(ctx context.Context, key string, token uint64) error {
		return today.Admit(ctx, key, token)
	})
}

func TestPermitGuard_RefusedWriteAppliesNothing(t *testing.T) {
	h := newHarness(t, 2*time.Second, []string{testenv.ZooKeeper(t).Addr()})
	write, c := permitWriter(t, h)
	if err := write(context.Background(), "never-held", 1); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Write for a key never held = %v, want ErrStaleToken", err)
	}
	if data, _, err := c.Get(h.root + "-state"); err != nil || len(data) != 0 {
		t.Fatalf("state = %x, %v after a refused write; want empty", data, err)
	}
}
