package zookeeper

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// suspectWindow is how long the connection may stay down before every lease
// of the session is reported lost, for a session timeout s.
//
// The server expires a session s after it last heard from the client (never
// earlier: expiry is rounded up to its next tick). go-zookeeper pings every s/3
// and declares the connection dead when nothing arrived for 2s/3, so when it
// reports Disconnected, the server heard from the client at most 2s/3 plus a
// round trip ago: the session is certain to live s/3 minus that round trip
// longer. The window keeps s/10 of it for the round trip and 1% for clock
// drift.
func suspectWindow(s time.Duration) time.Duration {
	return s/3 - s/10 - s/100
}

// monitor tracks the session's connection state for the locks it holds.
type monitor struct {
	mu     sync.Mutex
	timer  *time.Timer // armed while disconnected
	locks  map[*lock]struct{}
	closed bool // the backend is closing: start nothing more
	// breaks are the channels of key watches (Watch), closed when the
	// connection goes down or the session expires.
	breaks map[chan struct{}]struct{}
}

// subscribe returns a channel closed at the next disconnection or session
// expiry, and the function that forgets it; ok is false once the backend
// is closing.
func (m *monitor) subscribe() (broke <-chan struct{}, forget func(), ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, false
	}
	ch := make(chan struct{})
	if m.breaks == nil {
		m.breaks = map[chan struct{}]struct{}{}
	}
	m.breaks[ch] = struct{}{}
	return ch, func() {
		m.mu.Lock()
		delete(m.breaks, ch)
		m.mu.Unlock()
	}, true
}

// breakWatches closes every subscribed channel. The caller holds m.mu.
// Once the backend is closing, its watches end with their contexts
// instead: the connection's close is no break.
func (m *monitor) breakWatches() {
	if m.closed {
		return
	}
	for ch := range m.breaks {
		close(ch)
		delete(m.breaks, ch)
	}
}

// close stops the monitor before the backend waits for its goroutines.
func (m *monitor) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

// watchesState reports whether the backend sees the connection's state
// changes (its own connection, or a caller's that handed over its events).
func (b *backend) watchesState() bool { return b.stateEvents }

// onEvent is fed every event of the connection (as go-zookeeper's callback
// for a URL's connection, or from the event channel given to New).
func (b *backend) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	m := &b.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.State {
	case zk.StateExpired:
		m.breakWatches()
	case zk.StateDisconnected:
		m.breakWatches()
		if m.timer == nil && !m.closed {
			m.timer = time.AfterFunc(suspectWindow(b.SessionTimeout()), b.suspect)
		}
	case zk.StateHasSession:
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
	}
}

// suspect ends every lease of the session: the connection stayed down so long
// that the server may have expired it and granted its locks to others.
func (b *backend) suspect() {
	m := &b.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	m.timer = nil
	if m.closed {
		return
	}
	cause := fmt.Errorf("zookeeper: disconnected for %v: the session may have expired", suspectWindow(b.SessionTimeout()))
	if len(m.locks) > 0 {
		b.log.Warn("zookeeper: connection down too long: every lease of the session is lost", "locks", len(m.locks), "window", suspectWindow(b.SessionTimeout()))
	}
	for l := range m.locks {
		delete(m.locks, l)
		l.lost(cause)
		// If the session survives after all, its node would hold the lock
		// for nobody: delete it once the connection is back.
		l.deleteAfterPromise()
	}
}

// deleteAfterPromise deletes the own node of a lock whose loss was reported
// while its session may live on, in the background — but not before the
// validity promised to the holder ends: a holder busy writing when told of
// the loss must not overlap the next one because of a deletion of ours.
func (l *lock) deleteAfterPromise() {
	b := l.b
	l.releasing.Store(true)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTimer(time.Until(l.promisedUntil()))
		defer t.Stop()
		select {
		case <-t.C:
		case <-b.closing:
			// Closing ends the session (or the caller's connection
			// outlives us): the node goes with it either way.
		}
		dir, name, _ := cutLast(l.path)
		b.removeOwn(dir, "", name, nil)
		l.finish()
	}()
}

func (b *backend) track(l *lock) {
	b.mon.mu.Lock()
	b.mon.locks[l] = struct{}{}
	b.mon.mu.Unlock()
}

func (b *backend) untrack(l *lock) {
	b.mon.mu.Lock()
	delete(b.mon.locks, l)
	b.mon.mu.Unlock()
}

// readEvents feeds a caller's event channel to onEvent until it closes (with
// the connection) or the backend closes.
func (b *backend) readEvents(events <-chan zk.Event) {
	defer b.wg.Done()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			b.onEvent(ev)
		case <-b.closing:
			return
		}
	}
}
