package redis

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// hub hands wake-ups to the waiters of one Locker. The scripts publish a
// wake-up to one waiter — the head of the lock's queue in Redis — on the
// channel of its Locker, naming it by id; the hub wakes exactly that waiter.
type hub struct {
	id  string // the Locker's random id: its channel's suffix, its waiters' prefix
	seq atomic.Uint64

	mu      sync.Mutex
	waiters map[string]*waiter
}

type waiter struct {
	id    string        // hub id, a colon, a sequence number: its queue member
	wake  chan struct{} // buffered: a wake-up is never lost while the waiter is busy trying
	timer *time.Timer   // the fallback wait, reused across waits; owned by the waiting goroutine
}

// wait blocks until w is woken, d has passed, or ctx ends.
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	_, err := w.waitWoken(ctx, d)
	return err
}

// waitWoken is wait, and tells whether w was woken.
func (w *waiter) waitWoken(ctx context.Context, d time.Duration) (woken bool, _ error) {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.wake:
		w.timer.Stop()
		return true, nil
	case <-w.timer.C:
		return false, nil
	case <-ctx.Done():
		w.timer.Stop()
		return false, ctx.Err()
	}
}

// Waiters of New renew their queue entries: an entry not renewed for
// waiterLiveness is stale, and the heartbeat comes every heartbeatEvery. A
// head waiter that died (or was cut off) is then skipped within
// waiterLiveness + heartbeatEvery of its last heartbeat: by the release if
// it comes later, or by the next waiter's heartbeat, which finds the lock
// free and itself the first live waiter.
const (
	waiterLiveness = 700 * time.Millisecond
	heartbeatEvery = 200 * time.Millisecond
)

// stopTimer releases the fallback timer when the wait is over.
func (w *waiter) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// newHub returns the hub of a new Locker, with a random id: an owner id's
// 128 random bits, so that no two Lockers share a channel.
func newHub() *hub {
	return &hub{id: driver.NewOwnerID().String(), waiters: map[string]*waiter{}}
}

// add registers a new waiter. It must be called, and the Locker subscribed,
// before the waiter's first queued attempt, so that a wake-up published
// right after that attempt is not missed.
func (h *hub) add() *waiter {
	w := &waiter{id: h.id + ":" + strconv.FormatUint(h.seq.Add(1), 10), wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiters[w.id] = w
	return w
}

// remove unregisters w.
func (h *hub) remove(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.waiters, w.id)
}

// notify wakes the waiter with the given id, if it is still waiting here. A
// Redlock waiter may be woken by several masters at once: the buffered
// channel makes that one wake-up.
func (h *hub) notify(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[id]; w != nil {
		select {
		case w.wake <- struct{}{}:
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

// staleAfter is the slack, in ms, that acquire.lua adds to a waiter's
// fallback wait (the holder's PTTL plus a tenth, which covers the jitter
// above) to tell when its queue entry is stale: the waiter has not come back
// by then, so it crashed or was cut off, and a release skips it. A live
// waiter misjudged stale (a machine stalled for longer) only loses its place
// and its wake-up, not the lock: it tries again at its fallback wait and
// queues anew. Half the TTL covers Redlock's waits between split rounds.
func staleAfter(ttl time.Duration) int64 { return ttlMillis(2*time.Second + ttl/2) }

// subscriber is one pub/sub subscription of a Locker to its own wake-up
// channel on one Redis deployment. It starts on the first wait, not before, so
// a Locker that never waits holds no extra connection, and stays until Close.
// go-redis reconnects it after a connection loss; messages published
// meanwhile are lost, which the waiters' PTTL-bounded wait covers.
//
// The subscription is made by a goroutine of its own, with its own
// deadline (subscribeTimeout), outside the mutex: a server that stops
// answering holds up no waiter past its context, and not Close.
type subscriber struct {
	client  goredis.UniversalClient
	channel string
	hub     *hub

	mu      sync.Mutex
	ps      *goredis.PubSub
	done    chan struct{} // closed when the dispatching goroutine ends
	attempt *subAttempt   // the subscription being made, if any
	closed  bool
	failAt  time.Time // when the last attempt to subscribe failed (Redlock)
}

// subAttempt is one attempt to subscribe: done is closed when it ended,
// with err its outcome.
type subAttempt struct {
	ps   *goredis.PubSub
	done chan struct{}
	err  error
}

// subscribeTimeout bounds one attempt to subscribe: a server that has not
// confirmed a subscription by then is treated as unreachable for now.
const subscribeTimeout = 5 * time.Second

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
// server has confirmed it (from then on every release is seen), the attempt
// failed, or ctx ended. Waiters that call it meanwhile share one attempt.
func (s *subscriber) ensure(ctx context.Context) error {
	s.mu.Lock()
	if s.ps != nil || s.closed {
		s.mu.Unlock()
		return nil
	}
	a := s.attempt
	if a == nil {
		a = &subAttempt{ps: s.client.Subscribe(context.Background()), done: make(chan struct{})}
		s.attempt = a
		go s.subscribe(a)
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe runs attempt a: SUBSCRIBE and its confirmation, within
// subscribeTimeout.
func (s *subscriber) subscribe(a *subAttempt) {
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	// go-redis bounds a read by the context's deadline only on clients made
	// with ContextTimeoutEnabled: closing the PubSub ends it on any client.
	stop := context.AfterFunc(ctx, func() { _ = a.ps.Close() })
	err := a.ps.Subscribe(ctx, s.channel)
	if err == nil {
		_, err = a.ps.Receive(ctx)
	}
	if !stop() && err == nil {
		err = ctx.Err() // the timeout struck as the confirmation came
	}
	s.mu.Lock()
	s.attempt = nil
	if err == nil && !s.closed {
		s.ps, s.done = a.ps, make(chan struct{})
		go s.dispatch(a.ps.Channel(), s.done)
	} else {
		if err == nil {
			err = errClosedSubscriber
		}
		_ = a.ps.Close()
	}
	s.mu.Unlock()
	a.err = err
	close(a.done)
}

var errClosedSubscriber = errors.New("redis: the Locker was closed")

func (s *subscriber) dispatch(msgs <-chan *goredis.Message, done chan struct{}) {
	defer close(done)
	for m := range msgs {
		s.hub.notify(m.Payload)
	}
}

// close ends the subscription, or the attempt to make it, and waits for
// their goroutines.
func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	ps, done, a := s.ps, s.done, s.attempt
	s.ps = nil
	s.mu.Unlock()
	if a != nil {
		_ = a.ps.Close()
		<-a.done
	}
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
