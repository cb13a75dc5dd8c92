package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/distlock/locker"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MinHolds implements driver.MinHolds (see minHold).
func (b *backend) MinHolds() {}

// minHold is the minimum hold of one granted lock. Its hold lease, granted
// after the lock with a TTL of the hold in whole seconds rounded up, lives
// on the server at least until the hold ends. From the grant the own key
// sits on it, so a holder that crashes leaves the key until that lease
// expires; shortly before it does (half the lock TTL before its earliest
// end) a live holder moves the key back to the shared lease, which then
// keeps it at least a TTL more. A release or local expiry before the hold
// ends parks the key on the hold lease instead of deleting it.
type minHold struct {
	id   clientv3.LeaseID
	ends time.Time // the hold's end: the grant's answer plus the hold
	stop chan struct{}

	mu     sync.Mutex // serializes the move back with release
	parked bool       // released or expired: the key stays on the hold lease
}

// startHold gives l a minimum hold of d from now (just after the grant).
// On error the lock is still held on the shared lease, and the caller
// releases it.
func (b *backend) startHold(ctx context.Context, l *lock, d time.Duration) error {
	secs := int64(math.Ceil(d.Seconds()))
	rctx, cancel := b.requestContext(ctx)
	defer cancel()
	ends := time.Now().Add(d)
	sent := time.Now()
	resp, err := b.cli.Grant(rctx, secs)
	if err != nil {
		return fmt.Errorf("grant hold lease: %w", err)
	}
	h := &minHold{id: resp.ID, ends: ends, stop: make(chan struct{})}
	l.hold = h
	// The hold lease lives at least until sent + its TTL; the key goes back
	// to the shared lease half a lock TTL before that, which keeps it at
	// least a TTL from then: past the hold's end either way.
	back := sent.Add(time.Duration(resp.TTL)*time.Second - l.sl.ttl/2)
	if !time.Now().Before(back) {
		return nil // the shared lease alone outlives the hold
	}
	if err := l.whileOwn(ctx, clientv3.OpPut(l.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(h.id))); err != nil {
		return err
	}
	b.background(func(bctx context.Context) { l.moveBack(bctx, back, sent.Add(time.Duration(resp.TTL)*time.Second)) })
	return nil
}

// moveBack puts l's key back on its shared lease at back, unless it was
// parked first; it retries until the hold lease's earliest end (dead), and
// reports the lock lost if the key cannot be moved in time.
func (l *lock) moveBack(ctx context.Context, back, dead time.Time) {
	h := l.hold
	t := time.NewTimer(time.Until(back))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-h.stop:
		return
	case <-t.C:
	}
	backoff := newBackoff()
	for {
		h.mu.Lock()
		if h.parked {
			h.mu.Unlock()
			return
		}
		err := l.whileOwn(ctx, clientv3.OpPut(l.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(l.sl.id)))
		h.mu.Unlock()
		if err == nil || errors.Is(err, locker.ErrLeaseLost) || !time.Now().Before(dead) {
			if err != nil && l.lost != nil {
				l.lost(fmt.Errorf("%w: minimum hold's key not moved back to its lease: %w", locker.ErrLeaseLost, err))
			}
			return
		}
		if backoff.sleep(ctx, nil) != nil {
			return
		}
	}
}

// park ends l inside its minimum hold: its key stays on the hold lease,
// which frees it when the hold has passed. false, doing nothing, once the
// hold has ended (the caller then deletes the key).
func (l *lock) park(ctx context.Context) (bool, error) {
	h := l.hold
	if h == nil || !time.Now().Before(h.ends) {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !time.Now().Before(h.ends) {
		return false, nil
	}
	err := l.whileOwn(ctx, clientv3.OpPut(l.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(h.id)))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, nil // the hold lease is gone: its end has passed
	}
	if err != nil {
		return true, err
	}
	h.endLocked()
	l.sl.remove(l)
	l.own.free()
	return true, nil
}

// end stops the move back for good: l is released or expired.
func (h *minHold) end() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.endLocked()
	h.mu.Unlock()
}

func (h *minHold) endLocked() {
	if !h.parked {
		h.parked = true
		close(h.stop)
	}
}
