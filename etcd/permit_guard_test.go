package etcd_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/guardtest"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// permitWriter writes key's state through g: a put of the token under
// the harness's prefix.
func permitWriter(t *testing.T, h *harness) (guardtest.Write, *clientv3.Client) {
	cli := h.newClient(t)
	g, err := etcd.NewPermitGuard(cli, etcd.WithPermitGuardPrefix(h.prefix))
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, key string, token uint64) error {
		_, err := g.Write(ctx, key, token, clientv3.OpPut(h.prefix+"state/"+key, strconv.FormatUint(token, 10)))
		return err
	}, cli
}

func TestPermitGuard_AdmitsLivePermits_RefusesReleasedAndLost(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	write, _ := permitWriter(t, h)
	guardtest.Permits(t, h, "job", write)
}

func TestPermitGuard_PlainLock_AsTodaysGuard(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	write, cli := permitWriter(t, h)
	today := newGuard(t, cli, h.prefix+"fence/")
	guardtest.PlainLock(t, h, "job", write, func(ctx context.Context, key string, token uint64) error {
		return today.Admit(ctx, key, token)
	})
}

func TestPermitGuard_RefusedWriteAppliesNothing(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	write, cli := permitWriter(t, h)
	ctx := ctxFor(t, 30*time.Second)
	if err := write(ctx, "never-held", 1); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Write for a key never held = %v, want ErrStaleToken", err)
	}
	if v := get(t, cli, h.prefix+"state/never-held"); v != "" {
		t.Fatalf("a refused write left %q", v)
	}
}
