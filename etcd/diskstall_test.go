package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// TestEtcd_DiskStall_HolderSeesItsLossBeforeTheNextGrant: the server's disk
// stalls for three TTLs while A holds (refreshing itself) and B waits. No
// renewal can be applied meanwhile, and when the disk resumes etcd revokes
// the lease (etcd#15247 saw a stalled leader revoke every lease at once).
// A's renewals time out, so A must have seen its loss before B is granted
// the lock, and B's token must be larger.
func TestEtcd_DiskStall_HolderSeesItsLossBeforeTheNextGrant(t *testing.T) {
	s, disk := testenv.EtcdOnSlowDisk(t)
	h := newHarness(s.Addr())
	raw := h.newClient(t)
	a, b := mustLocker(t, h, nil), mustLocker(t, h, nil)
	ctx := ctxFor(t, 2*time.Minute)
	const ttl = 2 * time.Second
	held, err := a.Acquire(ctx, "k", locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		lease locker.Lease
		err   error
		// aEnded says whether A's lease had ended when B's Acquire returned.
		aEnded bool
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := b.Acquire(ctx, "k", locker.WithTTL(ttl))
		g := grant{lease: l, err: err}
		select {
		case <-held.Done():
			g.aEnded = true
		default:
		}
		granted <- g
	}()
	waitKeys(t, raw, h.prefix+"k\x00", 2) // B is queued behind A

	disk.Stall()
	time.Sleep(3 * ttl)
	disk.Resume()

	var g grant
	select {
	case g = <-granted:
	case <-ctx.Done():
		t.Fatalf("B was not granted the lock after the disk resumed (A's lease: %v)", held.Err())
	}
	if g.err != nil {
		t.Fatalf("B's Acquire across the stall: %v", g.err)
	}
	defer g.lease.Release(ctx)
	if !g.aEnded {
		t.Fatalf("B was granted token %d while A's lease (token %d) had not ended: two holders", g.lease.Token(), held.Token())
	}
	if !errors.Is(held.Err(), locker.ErrLeaseLost) {
		t.Errorf("A's lease ended with %v, want ErrLeaseLost", held.Err())
	}
	if g.lease.Token() <= held.Token() {
		t.Errorf("B's token %d after A's %d, want larger", g.lease.Token(), held.Token())
	}
}
