package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// watches are a backend's running Watch goroutines: Close ends them and
// waits for them.
type watches struct {
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup
	// plain is set once a server refused SSUBSCRIBE (before Redis 7): the
	// scripts PUBLISH there, and watches SUBSCRIBE.
	plain atomic.Bool
}

// start registers one more watch goroutine; false once closed.
func (w *watches) start() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.closing == nil {
		w.closing = make(chan struct{})
	}
	w.wg.Add(1)
	return true
}

// close ends every watch and waits for their goroutines.
func (w *watches) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		if w.closing == nil {
			w.closing = make(chan struct{})
		}
		close(w.closing)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// subscribeEvents subscribes to a lock's channel on c and returns once the
// server confirmed it, within subscribeTimeout or ctx: SSUBSCRIBE, in the
// channel's hash slot on a Cluster, or SUBSCRIBE on a server that has no
// sharded pub/sub (the scripts then PUBLISH).
func (w *watches) subscribeEvents(ctx context.Context, c goredis.UniversalClient, channel string) (*goredis.PubSub, error) {
	ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	try := func(sharded bool) (*goredis.PubSub, error) {
		var ps *goredis.PubSub
		if sharded {
			ps = c.SSubscribe(ctx)
		} else {
			ps = c.Subscribe(ctx)
		}
		// go-redis bounds a read by the context's deadline only on clients
		// made with ContextTimeoutEnabled: closing the PubSub ends it on any.
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
		var err error
		if sharded {
			err = ps.SSubscribe(ctx, channel)
		} else {
			err = ps.Subscribe(ctx, channel)
		}
		if err == nil {
			_, err = ps.Receive(ctx)
		}
		if !stop() && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			_ = ps.Close()
			return nil, err
		}
		return ps, nil
	}
	if !w.plain.Load() {
		ps, err := try(true)
		if err == nil || !goredis.HasErrorPrefix(err, "ERR unknown command") {
			return ps, err
		}
		w.plain.Store(true)
	}
	return try(false)
}

// state is what a watch needs to know of a lock between signals: whether
// it is held, and for how long at most without a refresh.
type state struct {
	held bool
	ttl  time.Duration
}

// follow runs a watch over subs, subscriptions to one lock's channel, of
// which at least need must stay unbroken; look reads the lock's state. It
// signals out after every message, and when a timer armed at the holder's
// TTL finds the lock no longer held (it expired). It ends, closing out,
// when ctx ends, the backend closes, too many subscriptions break (a lost
// connection: messages may have been lost), or look fails.
func (w *watches) follow(ctx context.Context, subs []*goredis.PubSub, need int, first state, look func(context.Context) (state, error)) <-chan struct{} {
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	events := make(chan struct{}, 1)
	broken := make(chan struct{}, len(subs))
	var readers sync.WaitGroup
	for _, ps := range subs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				m, err := ps.Receive(context.Background())
				if s, ok := m.(*goredis.Subscription); err != nil || ok && s.Count == 0 {
					// The connection broke or the server dropped the
					// subscription (a Cluster slot moved).
					broken <- struct{}{}
					return
				}
				if _, ok := m.(*goredis.Message); ok {
					select {
					case events <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	go func() {
		defer w.wg.Done()
		defer close(out)
		defer readers.Wait()
		defer func() {
			for _, ps := range subs {
				_ = ps.Close()
			}
		}()
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		arm := func(s state) {
			t.Stop()
			if s.held {
				// Just past the TTL: the key is gone by then unless refreshed.
				t.Reset(max(s.ttl, 0) + time.Millisecond)
			}
		}
		s := first
		arm(s)
		left := len(subs)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.closing:
				return
			case <-broken:
				if left--; left < need {
					return
				}
				continue
			case <-events:
				signal()
			case <-t.C:
			}
			now, err := look(ctx)
			if err != nil {
				return
			}
			if s.held && !now.held {
				signal() // expired (a release was signalled already)
			}
			s = now
			arm(s)
		}
	}()
	return out
}

// Watch implements driver.Watcher: a subscription to the lock's channel,
// which every script that grants, releases or publishes signals, and a
// timer armed at the holder's PTTL for its expiry.
func (b *backend) Watch(ctx context.Context, key string) (_ <-chan struct{}, err error) {
	defer refusedTo(&err)
	n := b.names(key)
	if !b.watches.start() {
		return nil, locker.ErrClosed
	}
	ps, err := b.watches.subscribeEvents(ctx, b.client, n.events)
	look := func(ctx context.Context) (state, error) {
		ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
		defer cancel()
		s, err := readSeen(inspectScript.Run(ctx, b.client, n.inspectKeys()).Result())
		return state{held: s.held(), ttl: s.pttl}, err
	}
	var first state
	if err == nil {
		// After the subscription: a change from here on is a message.
		if first, err = look(ctx); err != nil {
			_ = ps.Close()
		}
	}
	if err != nil {
		b.watches.wg.Done()
		return nil, err
	}
	return b.watches.follow(ctx, []*goredis.PubSub{ps}, 1, first, look), nil
}

// Publish implements driver.Publisher with publish.lua.
func (b *backend) Publish(ctx context.Context, dl driver.Lock, value string) (err error) {
	defer refusedTo(&err)
	if _, ok := dl.(*permit); ok {
		return fmt.Errorf("redis: publish: %w: %w", locker.ErrUnsupported, errPermitPublish)
	}
	l, ok := dl.(*lock)
	if !ok || l.b != b {
		return fmt.Errorf("redis: publish: %w", errForeignLock)
	}
	n, err := publishScript.Run(ctx, b.client, l.keys[:1], l.val, value).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}

var errForeignLock = errors.New("not a lock of this Locker")

// Watch implements driver.Watcher on every master: a subscription to the
// lock's channel on each (at least a quorum of them must subscribe, and
// stay subscribed: a change of the majority view is a grant, release or
// publish on a majority, which meets them in a master), and a timer armed
// at the majority view's TTL for its expiry.
func (r *redlock) Watch(ctx context.Context, key string) (_ <-chan struct{}, err error) {
	defer r.refusedByQuorum(&err)
	n := r.names(key)
	if !r.watches.start() {
		return nil, locker.ErrClosed
	}
	subs := make([]*goredis.PubSub, len(r.nodes))
	errs := make([]error, len(r.nodes))
	r.onAll(ctx, subscribeTimeout, func(ctx context.Context, i int, c goredis.UniversalClient) {
		subs[i], errs[i] = r.watches.subscribeEvents(ctx, c, n.events)
	})
	var live []*goredis.PubSub
	for _, ps := range subs {
		if ps != nil {
			live = append(live, ps)
		}
	}
	look := func(ctx context.Context) (state, error) {
		info, _, err := r.view(key, r.inspectEach(ctx, []names{n})[0])
		return state{held: info.Held, ttl: info.TTL}, err
	}
	var first state
	err = fmt.Errorf("redlock: watch: subscribed on %d of %d masters, quorum %d: %w", len(live), len(r.nodes), r.quorum, errors.Join(errs...))
	if len(live) >= r.quorum {
		first, err = look(ctx)
	}
	if err != nil {
		for _, ps := range live {
			_ = ps.Close()
		}
		r.watches.wg.Done()
		return nil, err
	}
	return r.watches.follow(ctx, live, r.quorum, first, look), nil
}

// Publish implements driver.Publisher: publish.lua on every master; it
// succeeds when a majority published, and reports ErrLeaseLost when no
// majority holds the lock for this owner any more. A round that a majority
// did not answer in time runs again, as a grant's does (retryFailed): the
// lease is still valid, and the same value written twice is written once.
func (r *redlock) Publish(ctx context.Context, dl driver.Lock, value string) (err error) {
	defer r.refusedByQuorum(&err)
	l, ok := dl.(*rlock)
	if !ok || l.r != r {
		return fmt.Errorf("redis: publish: %w", errForeignLock)
	}
	return r.retryFailed(ctx, l.ttl, func() error {
		return l.onHolders(ctx, "published", r.timeout(l.ttl), publishScript, value)
	})
}
