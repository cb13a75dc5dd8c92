package etcd_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// lateGrant is a fault injector in a waiter's gRPC stack. It holds back the
// answer of the re-check that grants the lock (a txn reading the range, which
// finds no predecessor) for hold, so the grant arrives after its own
// deadline and the portable layer gives it back; then it answers nothing to
// the give-back's delete until the request's context ends, as over a link
// cut for longer than the clean-up budget, and cancels the waiter's Acquire,
// so that it does not wait again. Every other request, the shared lease's
// renewals among them, goes through: a proxy cannot single these two out, and
// delaying or cutting the whole link for as long as that takes would kill
// the shared lease (its renewals time out at a third of the reserve), which
// frees the key by itself.
type lateGrant struct {
	hold     time.Duration
	cancel   context.CancelFunc // the waiter's Acquire
	granted  atomic.Bool        // a grant was held back; the next delete is cut
	gaveBack chan struct{}      // closed when the give-back's delete was cut
}

func (g *lateGrant) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tr, ok := req.(*pb.TxnRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if deletes(tr) && g.granted.CompareAndSwap(true, false) {
		g.cancel()
		<-ctx.Done()
		close(g.gaveBack)
		return status.FromContextError(ctx.Err()).Err()
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil && reChecks(tr) {
		if resp := reply.(*pb.TxnResponse); resp.Succeeded && len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			time.Sleep(g.hold)
			g.granted.Store(true)
		}
	}
	return err
}

// deletes reports whether tr deletes a key when it succeeds.
func deletes(tr *pb.TxnRequest) bool {
	for _, op := range tr.Success {
		if op.GetRequestDeleteRange() != nil {
			return true
		}
	}
	return false
}

// reChecks reports whether tr is a waiter's re-check: a read, and nothing
// else, if the own key still exists.
func reChecks(tr *pb.TxnRequest) bool {
	return len(tr.Success) == 1 && tr.Success[0].GetRequestRange() != nil
}

// TestEtcd_LateGrantGiveBackFails_LockStillFreed: a waiter whose grant
// arrives after its own deadline gives the lock back; if that release fails
// (the link is cut for longer than the clean-up budget), the own key must
// still be removed within the TTL: it lives on the shared lease, which the
// Locker keeps renewing, so otherwise nobody holds the lock and nobody else
// can take it until the Locker closes.
func TestEtcd_LateGrantGiveBackFails_LockStillFreed(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	const (
		key = "late-grant-give-back"
		ttl = time.Second
	)
	actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g := &lateGrant{hold: ttl, cancel: cancel, gaveBack: make(chan struct{})}
	a, err := newLockerOn(h, interceptedClient(t, h.endpoints, g.intercept))
	if err != nil {
		t.Fatalf("new locker: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })

	b := mustLocker(t, h, nil)
	held, err := b.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("B TryAcquire: %v", err)
	}
	acquired := make(chan error, 1)
	go func() {
		l, err := a.Acquire(actx, key, locker.WithTTL(ttl))
		if err == nil {
			err = errors.New("granted")
			_ = l.Release(context.Background())
		}
		acquired <- err
	}()
	waitKeys(t, h.newClient(t), h.prefix, 2) // B's key and A's, waiting
	if err := held.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("B Release: %v", err)
	}
	select {
	case <-g.gaveBack:
	case <-time.After(30 * time.Second):
		t.Fatal("A's grant was never given back")
	}
	if err := <-acquired; !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("A's Acquire = %v, want ErrLeaseLost (a late grant)", err)
	}
	restored := time.Now()

	// The grant's deadline has passed: the key must go within the TTL, plus
	// the backend's expiry slack, plus room for a loaded machine.
	waitFreed(t, mustLocker(t, h, nil), key, restored, ttl+h.ExpirySlack()+10*time.Second,
		"after A's give-back of a late grant failed: the key outlives it on the renewed shared lease")
}

// waitFreed polls l until it gets key, and fails t if it is still busy
// bound after since (why says what that means).
func waitFreed(t *testing.T, l locker.Locker, key string, since time.Time, bound time.Duration, why string) {
	t.Helper()
	for {
		got, err := l.TryAcquire(ctxFor(t, 10*time.Second), key)
		if err == nil {
			t.Logf("freed %v after it was due", time.Since(since).Round(time.Millisecond))
			_ = got.Release(ctxFor(t, 10*time.Second))
			return
		}
		if !errors.Is(err, locker.ErrLocked) && !errors.Is(err, locker.ErrUnavailable) {
			t.Fatalf("TryAcquire %q: %v", key, err)
		}
		if time.Since(since) > bound {
			t.Fatalf("TryAcquire %q still %v %v %s", key, err, bound, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
