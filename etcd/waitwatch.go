package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// waiterWatch is the watch a waiter waits on: opened at the current
// revision, and kept across re-checks for as long as the waiter watches the
// same thing.
//
// Why not watch from the revision after the last read (WithRev), as the
// re-check would suggest: etcd serves a watch that starts in the past from
// its "unsynced" set, which it catches up every 100 ms (watchResyncPeriod in
// etcd's mvcc package), and under contention the revision moves between the
// read and the watch's creation nearly every time. A release then reached
// the next waiter up to 100 ms late: in the peers run of 2026-12-04, etcd's
// handoff at 32 and 128 waiters had a p50 of 1.6 ms and a p90 of 84–86 ms.
// A watch from the current revision is "synced" and gets each event as it
// is applied. What happened between the read and the watch's start is left
// to one more re-check, made only when the revision moved in between.
type waiterWatch struct {
	target string // a key (its predecessor) or a range (a first waiter's)
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

// change waits for a change of what w watches after its last read (at
// w.watchRev-1). It reports true on an event, or when a new watch was
// created after a later revision (the re-check then covers the gap); false
// when the watch ended without news (the re-check then decides); and an
// error when ctx ended or the shared lease died (the own key died with it).
func (ww *waiterWatch) change(ctx context.Context, cli *clientv3.Client, sl *sharedLease, w *waiter) (bool, error) {
	// The target alone tells the watches apart: a first waiter watches the
	// lock's range, any other waiter a key in it, and the filters follow.
	target := w.pred
	if w.first {
		target = w.lp
	}
	if ww.ch != nil && ww.target != target {
		ww.stop()
	}
	if ww.ch == nil {
		ww.open(ctx, cli, target, w)
	}
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-sl.done:
			return false, sl.placeLost()
		case wr, ok := <-ww.ch:
			switch {
			case !ok || wr.Canceled || wr.Err() != nil:
				ww.stop()
				return false, nil
			case wr.Created:
				// The server's revision when it made the watch, read after
				// the watch was registered: the watch sees every change
				// after it.
				if wr.Header.Revision >= w.watchRev {
					return true, nil
				}
			case len(wr.Events) > 0:
				return true, nil
			}
		}
	}
}

// open starts the watch on target, from the current revision; its first
// reply is the server's created notice.
func (ww *waiterWatch) open(ctx context.Context, cli *clientv3.Client, target string, w *waiter) {
	// RequireLeader: a member cut off from the leader ends the watch instead
	// of leaving this waiter deaf to the release.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	switch {
	case w.first:
		opts = append(opts, clientv3.WithPrefix(), clientv3.WithFilterPut())
	case w.limit == 1:
		opts = append(opts, clientv3.WithFilterPut())
	}
	*ww = waiterWatch{target: target, ch: cli.Watch(wctx, target, opts...), cancel: cancel}
}

// stop ends the watch, if one is open.
func (ww *waiterWatch) stop() {
	if ww.cancel != nil {
		ww.cancel()
	}
	*ww = waiterWatch{}
}
