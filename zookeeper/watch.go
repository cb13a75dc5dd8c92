package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker/driver"
)

var _ driver.Watcher = (*backend)(nil)

// errWatchBroken ends a key watch whose ZooKeeper watches ended with the
// connection or the session.
var errWatchBroken = errors.New("zookeeper: watch ended with the connection or session")

// Watch implements driver.Watcher with ZooKeeper's one-shot watches: a
// children watch on key's lock directory (a node queued or gone: a grant, a
// release, an expiry, a handover) and a data watch on the node first in the
// queue (a Publish), or an exists watch on the directory while it does not
// exist. Each watch that fires is set again before the channel is signalled,
// so a change after the signal fires a watch in turn. A disconnection or a
// session expiry (seen through the connection's events: a Locker made by
// New sees them only when given WithEvents) closes the channel, as do ctx
// and Close. ZooKeeper (as go-zookeeper speaks it) cannot take a watch
// back: one that has not fired when the key watch ends stays set until its
// node changes or the session ends.
func (b *backend) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	ch, err := b.watch(ctx, key)
	return ch, unauthorized(err)
}

func (b *backend) watch(ctx context.Context, key string) (<-chan struct{}, error) {
	broke, forget, ok := b.mon.subscribe()
	if !ok {
		return nil, errClosed
	}
	w := &keyWatch{b: b, dir: b.dir(key)}
	if err := w.arm(ctx, true); err != nil {
		forget()
		return nil, err
	}
	out := make(chan struct{}, 1)
	// Close ends the watch through its context, as the portable layer's
	// Close ends the caller's: the one cause shows whichever comes first.
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		defer forget()
		for {
			var ev zk.Event
			children := false
			select {
			case ev = <-w.children:
				children = true
			case ev = <-w.exists:
				children = true
			case ev = <-w.data:
				w.data = nil
			case <-broke:
				return
			case <-ctx.Done():
				return
			}
			if ev.Type == zk.EventNotWatching {
				return
			}
			if err := w.arm(ctx, children); err != nil {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}

// keyWatch is the set of ZooKeeper watches that follows one lock directory.
type keyWatch struct {
	b   *backend
	dir string
	// Of children and exists, one is set: exists while the directory does
	// not exist. data is the watch on the holder's node, nil when the queue
	// is empty or the holder went away before it was set.
	children, exists, data <-chan zk.Event
	holder                 string // the node data watches
}

// maxArmAttempts bounds how often arm lists the directory again when it is
// made or removed between two of its requests.
const maxArmAttempts = 8

// arm sets the watches again: the directory's (and so the holder's) when
// children is set, after its children or existence changed; otherwise only
// the holder's data watch, after it fired.
func (w *keyWatch) arm(ctx context.Context, children bool) error {
	b := w.b
	if !children {
		return w.watchHolder(ctx, w.holder)
	}
	w.children, w.exists = nil, nil
	for range maxArmAttempts {
		var (
			kids    []string
			present bool
		)
		err := b.do(ctx, func() (err error) {
			kids, _, w.children, err = b.conn.ChildrenW(w.dir)
			if !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			// ExistsW on a missing node leaves a watch for its creation:
			// that is the point here.
			present, _, w.exists, err = b.conn.ExistsW(w.dir)
			return err
		})
		if err != nil {
			return err
		}
		if w.exists != nil {
			if present {
				w.exists = nil // made meanwhile: list it
				continue
			}
			w.data, w.holder = nil, ""
			return nil
		}
		q, err := b.queue(ctx, w.dir, kids)
		if err != nil {
			return err
		}
		if len(q) == 0 {
			w.data, w.holder = nil, ""
			return nil
		}
		if q[0].name == w.holder && w.data != nil {
			return nil // the holder's data watch is still set
		}
		return w.watchHolder(ctx, q[0].name)
	}
	return fmt.Errorf("%w: %s was made and removed %d times while it was watched", errWatchBroken, w.dir, maxArmAttempts)
}

// watchHolder sets the data watch on the holder's node, name. A node already
// gone needs none: its deletion fires the children watch.
func (w *keyWatch) watchHolder(ctx context.Context, name string) error {
	w.data, w.holder = nil, name
	if name == "" {
		return nil
	}
	return w.b.do(ctx, func() (err error) {
		_, _, w.data, err = w.b.conn.GetW(w.dir + "/" + name)
		return ignoreNoNode(err)
	})
}
