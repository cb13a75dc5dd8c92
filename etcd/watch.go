package etcd

import (
	"context"

	"github.com/distlock/locker"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch implements driver.Watcher with an etcd watch on the lock's range,
// from the revision after a read made first: every change from that read
// on — a key put (a grant, a waiter, a published value) or deleted (a
// release, an Expire, the lease's expiry) — is an event, so expiry needs no
// timer. The client resumes a broken watch stream on another member (or the
// same one, back) from the last revision it saw, so a member's restart
// loses nothing. The watch requires a leader, as a waiter's does: a member
// cut off from its leader ends it instead of going deaf, and so does a
// compaction past the revisions it has yet to see; the channel then closes.
func (b *backend) Watch(ctx context.Context, key string) (_ <-chan struct{}, err error) {
	defer markRefusals(&err)
	lp := lockPrefix(b.prefix, key)
	rctx, cancel := b.requestContext(ctx)
	resp, err := b.cli.Get(rctx, lp, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
	events := b.cli.Watch(wctx, lp, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	out := make(chan struct{}, 1)
	relay := func(closed context.Context) {
		defer close(out)
		defer stop()
		for {
			select {
			case <-closed.Done():
				return
			case wr, ok := <-events:
				if !ok || wr.Canceled || wr.Err() != nil {
					return // wctx ended, or the watch broke
				}
				if len(wr.Events) > 0 {
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}
	}
	if !b.background(relay) {
		stop()
		return nil, locker.ErrClosed
	}
	return out, nil
}
