// Package places bounds how many of one Locker's Acquires of one lock wait
// at the server at a time. A waiter at the server costs it work for as long
// as it waits — a key in etcd's range that every create reads, a queue
// entry in Redis renewed by heartbeat — so W waiters in one process would
// make every handoff cost the server O(W). With a bound, a Locker's further
// Acquires of the lock wait in the process, in arrival order, for one of
// its places; the server's work then grows with the Lockers, not the
// waiters.
package places

import (
	"context"
	"slices"
	"sync"
)

// Set is one Locker's places, per lock. The zero value is not usable: call
// New.
type Set struct {
	max    int
	mu     sync.Mutex
	queues map[string]*queue // by lock
}

// queue is one lock's waiting Acquires in one Locker: active of them have a
// place, the others wait in arrival order.
type queue struct {
	active int
	next   []chan struct{} // closed to hand over a place, oldest first
}

// New returns a Set of n places per lock (at least 1).
func New(n int) *Set {
	return &Set{max: max(n, 1), queues: map[string]*queue{}}
}

// Enter takes one of lock's places for an Acquire, waiting for one in
// arrival order while all are taken, until ctx ends. It returns the
// function that gives the place back, to the oldest Acquire still waiting
// for one; call it once the Acquire holds the lock or gave up (more calls do
// nothing).
func (s *Set) Enter(ctx context.Context, lock string) (leave func(), err error) {
	s.mu.Lock()
	q := s.queues[lock]
	if q == nil {
		q = &queue{}
		s.queues[lock] = q
	}
	leave = sync.OnceFunc(func() { s.leave(lock, q) })
	if q.active < s.max && len(q.next) == 0 {
		q.active++
		s.mu.Unlock()
		return leave, nil
	}
	turn := make(chan struct{})
	q.next = append(q.next, turn)
	s.mu.Unlock()
	select {
	case <-turn:
		return leave, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	i := slices.Index(q.next, turn)
	if i >= 0 {
		q.next = slices.Delete(q.next, i, i+1)
	}
	s.mu.Unlock()
	if i < 0 {
		leave() // handed a place as ctx ended: pass it on
	}
	return nil, ctx.Err()
}

// leave gives a place of q back: to the oldest waiting Acquire, or to no
// one (q is dropped once no Acquire has or waits for a place).
func (s *Set) leave(lock string, q *queue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(q.next) > 0 {
		close(q.next[0])
		q.next = q.next[1:]
		return
	}
	q.active--
	if q.active == 0 {
		delete(s.queues, lock)
	}
}
