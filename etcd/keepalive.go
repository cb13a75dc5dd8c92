package etcd

import (
	"context"
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
	cli    *clientv3.Client
	id     clientv3.LeaseID
	stream pb.Lease_LeaseKeepAliveClient // nil until opened, and after a failure
	cancel context.CancelFunc
}

// renew sends one renewal and waits for its answer, at most timeout. A
// failed or timed-out exchange closes the stream; the next call opens
// another.
func (k *keepAlive) renew(ctx context.Context, timeout time.Duration) error {
	var sctx context.Context
	if k.stream == nil {
		sctx, k.cancel = context.WithCancel(ctx)
	}
	timer := time.AfterFunc(timeout, k.cancel)
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
	if !timer.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		k.close()
		return rpctypes.Error(err)
	}
	if resp.TTL <= 0 {
		return rpctypes.ErrLeaseNotFound
	}
	return nil
}

// close ends the stream, if open.
func (k *keepAlive) close() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel = nil, nil
}
