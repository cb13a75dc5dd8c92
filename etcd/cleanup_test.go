package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// interceptedClient connects to endpoints with extra dial options, and
// through a unary interceptor if icept is not nil: a
// fault injector in the client's own gRPC stack, for faults no proxy can
// make at the right request (a request held in flight while later ones
// pass it, a server's backpressure answer). The server is real.
func interceptedClient(t *testing.T, endpoints []string, icept grpc.UnaryClientInterceptor, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	if icept != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(icept))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: opts,
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// putsKey reports whether req is a txn that would put a key.
func putsKey(req any) bool {
	tr, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range tr.Success {
		if op.GetRequestPut() != nil {
			return true
		}
	}
	return false
}

// TestEtcd_ServerPausedPastCleanupBudget_ExpiredLockStillFreed: a holder
// that stops refreshing must free its lock even when etcd is frozen (docker
// pause) from just before its deadline for longer than the portable layer's
// clean-up budget (5 s) but shorter than the shared lease's life (T + R),
// after which the lease is renewed again and would keep the key for good.
// The holder's connections are reset as the outage begins (as by a load
// balancer giving up on a silent server), so that no delete sent during it
// is applied when the server wakes up; its client reconnects promptly, so
// the lease is renewed again well within its life.
func TestEtcd_ServerPausedPastCleanupBudget_ExpiredLockStillFreed(t *testing.T) {
	srv := testenv.Etcd(t)
	proxy := srv.Proxy(t)
	h := newHarness(srv.Addr())
	const (
		ttl   = 10 * time.Second // the shared lease lives T + R = 12 s
		pause = 8 * time.Second
	)
	key := "expire-outage"
	cli := interceptedClient(t, []string{proxy.Addr()}, nil,
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond}}))
	a, err := newLockerOn(h, cli)
	if err != nil {
		t.Fatalf("new locker: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	lease, err := a.TryAcquire(ctxFor(t, 10*time.Second), key, locker.WithTTL(ttl), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	time.Sleep(time.Until(lease.Deadline().Add(-time.Second)))
	srv.Pause(t)
	proxy.ResetPeer(t)
	var unpaused atomic.Bool
	t.Cleanup(func() {
		if !unpaused.Load() {
			srv.Unpause(t)
		}
	})
	time.Sleep(pause)
	srv.Unpause(t)
	unpaused.Store(true)
	proxy.Heal(t)
	healed := time.Now()
	if !isDone(lease) {
		t.Fatal("the lease is not done after its deadline")
	}

	// The lease is renewed after the outage, so only the Locker can free
	// the key now. Give it the lease's whole life again: far more than a
	// retry needs.
	waitFreed(t, mustLocker(t, h, nil), key, healed, ttl+2*time.Second,
		fmt.Sprintf("after a %v outage that began 1 s before the holder's deadline (TTL %v): the expired lock was never freed", pause, ttl))
}

// heldPut holds back the first txn that puts a key: the caller sees its
// request time out, while the request itself stays in flight and reaches
// the server only when release is called — after the caller's clean-up, as
// a request delayed on one path can arrive after a later one sent on
// another (a reconnect, a different member).
type heldPut struct {
	armed   atomic.Bool
	release chan struct{}
	landed  chan error // the held request's outcome, once it reached the server
	wg      sync.WaitGroup
}

func newHeldPut() *heldPut {
	return &heldPut{release: make(chan struct{}), landed: make(chan error, 1)}
}

func (p *heldPut) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !putsKey(req) || !p.armed.CompareAndSwap(true, false) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-p.release
		p.landed <- invoker(context.Background(), method, req, new(pb.TxnResponse), cc, opts...)
	}()
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

// TestEtcd_CreateAppliedAfterItsCleanup_LeavesNoHolder: an acquire whose
// create times out cleans up by owner id; if the create reaches the server
// only after that clean-up, it must not become a holder nobody stands
// behind (the shared lease is renewed while the Locker lives).
func TestEtcd_CreateAppliedAfterItsCleanup_LeavesNoHolder(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	held := newHeldPut()
	a, err := newLockerOn(h, interceptedClient(t, h.endpoints, held.intercept))
	if err != nil {
		t.Fatalf("new locker: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	const key = "late-create"
	// Warm up: the shared lease exists, so the held request is the create.
	warm, err := a.TryAcquire(ctxFor(t, 10*time.Second), "warm-up")
	if err != nil {
		t.Fatalf("warm-up TryAcquire: %v", err)
	}
	if err := warm.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("warm-up Release: %v", err)
	}

	held.armed.Store(true)
	if _, err := a.Acquire(ctxFor(t, 30*time.Second), key); err == nil {
		t.Fatal("Acquire whose create was held back succeeded")
	}
	close(held.release)
	if err := <-held.landed; err != nil {
		t.Fatalf("the held create did not reach the server: %v", err)
	}
	held.wg.Wait()

	b := mustLocker(t, h, nil)
	got, err := b.TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire after the late create = %v, want the lock free: the create applied after its clean-up left a holder", err)
	}
	if err := got.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again, err := a.Acquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("the same Locker's next Acquire = %v", err)
	}
	if err := again.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// backpressure answers the first n puts as an overloaded etcd does
// ("etcdserver: too many requests": its apply loop is too far behind the
// commit index, the request was not proposed), then lets requests through.
type backpressure struct{ left atomic.Int64 }

func (b *backpressure) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if putsKey(req) && b.left.Add(-1) >= 0 {
		// What goes over the wire: the server's error is no gRPC status,
		// so gRPC sends its text with code Unknown.
		return status.Error(codes.Unknown, rpctypes.ErrTooManyRequests.Error())
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// TestEtcd_TooManyRequests_AcquireBacksOffAndRetries: a blocking Acquire
// rides out the server's backpressure, within its context; TryAcquire makes
// one attempt and reports it as unavailability.
func TestEtcd_TooManyRequests_AcquireBacksOffAndRetries(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	bp := &backpressure{}
	a, err := newLockerOn(h, interceptedClient(t, h.endpoints, bp.intercept))
	if err != nil {
		t.Fatalf("new locker: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	const key = "backpressure"

	bp.left.Store(1)
	if _, err := a.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("TryAcquire under backpressure = %v, want ErrUnavailable", err)
	}

	bp.left.Store(5)
	lease, err := a.Acquire(ctxFor(t, 30*time.Second), key)
	if err != nil {
		t.Fatalf("Acquire after 5 answers of %q = %v, want it granted", rpctypes.ErrTooManyRequests, err)
	}
	if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}

	bp.left.Store(1 << 40)
	if _, err := a.Acquire(ctxFor(t, time.Second), key); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire under endless backpressure = %v, want its context's deadline", err)
	}
	bp.left.Store(0)
	got, err := mustLocker(t, h, nil).TryAcquire(ctxFor(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("TryAcquire after the refused Acquire = %v: it left something behind", err)
	}
	_ = got.Release(ctxFor(t, 10*time.Second))
}
