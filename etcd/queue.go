package etcd

import (
	"context"
	"slices"
	"sync"
)

// maxQueued is how many waiter keys one Locker keeps waiting in one lock's
// range at a time. Every create txn of Acquire and every re-check reads the
// lock's range sorted by create revision, which etcd does by reading the
// whole range — inside its apply loop for a create. A crowd of 10,000 keys
// made each create cost 10,000 reads there: the loop fell behind, renewals
// timed out and the shared lease died with every waiter on it. With at most
// maxQueued keys per Locker the range stays small; the Locker's further
// Acquires of the lock wait in the process, in arrival order.
const maxQueued = 8

// queue is one lock's waiting Acquires in one Locker: active of them have a
// place (may have a key in the range), the others wait in arrival order.
type queue struct {
	active int
	next   []chan struct{} // closed to hand over a place, oldest first
}

// enter takes one of the lock range lp's maxQueued places for an Acquire,
// waiting for one in arrival order while all are taken, until ctx ends. It
// returns the function that gives the place back, to the oldest Acquire
// still waiting for one; call it once the Acquire holds the lock or gave up.
func (b *backend) enter(ctx context.Context, lp string) (leave func(), err error) {
	b.qmu.Lock()
	q := b.queues[lp]
	if q == nil {
		q = &queue{}
		b.queues[lp] = q
	}
	leave = sync.OnceFunc(func() { b.leave(lp, q) })
	if q.active < maxQueued && len(q.next) == 0 {
		q.active++
		b.qmu.Unlock()
		return leave, nil
	}
	turn := make(chan struct{})
	q.next = append(q.next, turn)
	b.qmu.Unlock()
	select {
	case <-turn:
		return leave, nil
	case <-ctx.Done():
	}
	b.qmu.Lock()
	i := slices.Index(q.next, turn)
	if i >= 0 {
		q.next = slices.Delete(q.next, i, i+1)
	}
	b.qmu.Unlock()
	if i < 0 {
		leave() // handed a place as ctx ended: pass it on
	}
	return nil, ctx.Err()
}

// leave gives a place of q back: to the oldest waiting Acquire, or to no
// one (q is dropped once no Acquire has or waits for a place).
func (b *backend) leave(lp string, q *queue) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	if len(q.next) > 0 {
		close(q.next[0])
		q.next = q.next[1:]
		return
	}
	q.active--
	if q.active == 0 {
		delete(b.queues, lp)
	}
}
