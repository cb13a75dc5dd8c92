package redis

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// hub hands release messages to the waiters of one Locker. Each message
// wakes one waiter of its key — the longest waiting one in this process —
// not all of them: they would only race each other for the lock the message
// announced (a herd). A waiter that gets the lock keeps it; one that loses it
// (another process was faster) waits for the next release; one that gives up
// passes an unconsumed wake-up on.
type hub struct {
	mu   sync.Mutex
	keys map[string]*waitList
}

type waitList struct {
	waiters []*waiter
	// last is the owner whose release last woke this key: a Redlock release
	// is published by every master, and should wake one waiter, not N.
	last string
}

type waiter struct {
	tag   string
	wake  chan struct{} // buffered: a wake-up is never lost while the waiter is busy trying
	timer *time.Timer   // the fallback wait, reused across waits; owned by the waiting goroutine
}

// wait blocks until w is woken, d has passed, or ctx ends.
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.wake:
	case <-w.timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// stopTimer releases the fallback timer when the wait is over.
func (w *waiter) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

func newHub() *hub { return &hub{keys: map[string]*waitList{}} }

// add registers a waiter for the lock whose encoded key is tag. It must be
// called before the attempt the waiter follows up on, so that a release
// between that attempt and the wait is not missed.
func (h *hub) add(tag string) *waiter {
	w := &waiter{tag: tag, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	wl := h.keys[tag]
	if wl == nil {
		wl = &waitList{}
		h.keys[tag] = wl
	}
	wl.waiters = append(wl.waiters, w)
	return w
}

// remove unregisters w, passing a wake-up it did not use to the next waiter.
func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wl := h.keys[w.tag]
	if wl == nil {
		return
	}
	for i, x := range wl.waiters {
		if x == w {
			wl.waiters = append(wl.waiters[:i], wl.waiters[i+1:]...)
			break
		}
	}
	if len(wl.waiters) == 0 {
		delete(h.keys, w.tag)
		return
	}
	select {
	case <-w.wake:
		wakeFirst(wl)
	default:
	}
}

// notify handles the release of tag by owner.
func (h *hub) notify(tag, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	wl := h.keys[tag]
	if wl == nil || (owner != "" && owner == wl.last) {
		return
	}
	wl.last = owner
	wakeFirst(wl)
}

// wakeFirst wakes the first waiter that has no wake-up pending.
func wakeFirst(wl *waitList) {
	for _, w := range wl.waiters {
		select {
		case w.wake <- struct{}{}:
			return
		default:
		}
	}
}

// fallbackWait is how long a waiter sleeps when no release message comes: the
// holder's remaining time to live (when the lock will be free even if its
// holder died, or a message was missed while the subscription reconnected),
// plus up to 10% random jitter so that waiters of several processes do not
// retry in step. It is never a fixed polling interval.
func fallbackWait(pttl, ttl time.Duration) time.Duration {
	if pttl <= 0 {
		// No expiry on the key (not one of ours) or it just expired: retry
		// soon, but not in a tight loop.
		pttl = min(ttl, 10*time.Millisecond)
	}
	return pttl + time.Millisecond + rand.N(pttl/10+time.Millisecond)
}

// subscriber is one pub/sub subscription of a Locker to one Redis
// deployment's release channel. It starts on the first wait, not before, so
// a Locker that never waits holds no extra connection, and stays until Close.
// go-redis reconnects it after a connection loss; messages published
// meanwhile are lost, which the waiters' PTTL-bounded wait covers.
type subscriber struct {
	client  goredis.UniversalClient
	channel string
	hub     *hub

	mu     sync.Mutex
	ps     *goredis.PubSub
	done   chan struct{} // closed when the dispatching goroutine ends
	closed bool
	failAt time.Time // when the last attempt to subscribe failed (Redlock)
}

// resubscribeAfter is how long a Redlock master whose subscription failed is
// left alone before waiters try it again.
const resubscribeAfter = 5 * time.Second

// due reports whether a subscription should be attempted now.
func (s *subscriber) due() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ps == nil && !s.closed && time.Since(s.failAt) >= resubscribeAfter
}

// failed records the outcome of an attempt to subscribe.
func (s *subscriber) failed(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	s.failAt = time.Now()
	s.mu.Unlock()
}

// ensure starts the subscription if it is not running, and returns once the
// server has confirmed it: from then on every release is seen.
func (s *subscriber) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil || s.closed {
		return nil
	}
	ps := s.client.Subscribe(ctx, s.channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return err
	}
	s.ps, s.done = ps, make(chan struct{})
	go s.dispatch(ps.Channel(), s.done)
	return nil
}

func (s *subscriber) dispatch(msgs <-chan *goredis.Message, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		s.hub.notify(parseWake(m.Payload))
	}
}

// close ends the subscription and waits for its goroutine.
func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	ps, done := s.ps, s.done
	s.ps = nil
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
