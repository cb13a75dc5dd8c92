package etcd

import (
	"cmp"
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAlive renews one lease over a LeaseKeepAlive stream it keeps open
// between renewals, one request and its answer at a time, so the time
// each renewal was sent is known exactly, as with KeepAliveOnce.
//
// KeepAliveOnce opens a stream per call, and the client logs in again
// (Authenticate) before opening any stream when it has a user name and
// password: a bcrypt check and a raft write on the server per renewal,
// several a second per Locker (see docs/design/security-etcd.md). Kept
// open, the stream logs in once.
type keepAlive struct {
	cli  *clientv3.Client
	id   clientv3.LeaseID
	base context.Context // the stream's: the backend's life

	mu     sync.Mutex                    // one exchange at a time: the renew loop's, a Refresh's
	stream pb.Lease_LeaseKeepAliveClient // nil until opened, and after a failure
	cancel context.CancelFunc
}

// renew sends one renewal and waits for its answer, until ctx ends or at
// most timeout. It reports when the renewal that succeeded was sent; the
// zero time, sending nothing, if fresh (when given) reports true once the
// exchange before it is over. A failed or timed-out exchange closes the
// stream; the next call opens another.
func (k *keepAlive) renew(ctx context.Context, timeout time.Duration, fresh func() bool) (time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fresh != nil && fresh() {
		return time.Time{}, nil // renewed meanwhile: a herd of refreshes sends one
	}
	var sctx context.Context
	if k.stream == nil {
		sctx, k.cancel = context.WithCancel(k.base)
	}
	timer := time.AfterFunc(timeout, k.cancel)
	stop := context.AfterFunc(ctx, k.cancel)
	sent := time.Now()
	var err error
	if k.stream == nil {
		k.stream, err = pb.NewLeaseClient(k.cli.ActiveConnection()).LeaseKeepAlive(sctx)
	}
	var resp *pb.LeaseKeepAliveResponse
	if err == nil {
		if err = k.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(k.id)}); err == nil {
			resp, err = k.stream.Recv()
		}
	}
	if (!timer.Stop() || !stop()) && err == nil {
		err = cmp.Or(ctx.Err(), context.DeadlineExceeded)
	}
	if err != nil {
		k.closeLocked()
		return time.Time{}, rpctypes.Error(err)
	}
	if resp.TTL <= 0 {
		return time.Time{}, rpctypes.ErrLeaseNotFound
	}
	return sent, nil
}

// close ends the stream, if open.
func (k *keepAlive) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closeLocked()
}

func (k *keepAlive) closeLocked() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel = nil, nil
}
