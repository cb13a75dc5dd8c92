package zookeeper

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Where a lease's validity starts.
//
// The leader expires sessions, and counts a session's timeout S from the
// last touch it applied. A follower touches a session for each of its
// requests locally, and passes its touches on to the leader only in its
// replies to the leader's pings (every tickTime/2); the leader does not
// touch a session for a request a follower forwards (a sync, a create). So
// a request answered through a follower proves the session alive at the
// leader, not that its timeout counts from that request: a follower cut off
// right after it forwarded the request, before its next ping reply, leaves
// the leader with an older touch (a loaded run's linearizability check saw
// two holders overlap by 188 ms so).
//
// What is proved instead: the follower writes its ping replies and the
// requests it forwards on one connection, in order, and the leader handles
// them in that order. A request A answered at least touchLag before a
// request B was sent had its touch passed on in a ping reply written before
// B was forwarded, as long as the leader's pings reach the follower within
// touchLag; so once the leader has handled B, it counts the session's
// timeout from no earlier than A was sent. A lease's validity starts at the
// latest such A (or when the session was created, for a connection that
// had none when the backend was made), never at B.
type touches struct {
	mu   sync.Mutex
	recs []touch // oldest first
}

// A touch is one request answered in session.
type touch struct {
	sent, answered time.Time
	session        int64
}

// maxTouches bounds the touches kept; they are kept at least touchLag/8
// apart, so they cover eight touchLags.
const maxTouches = 64

// touchLag is how long after a request is answered the backend counts on
// its touch having reached the leader: S/4. ZooKeeper negotiates no session
// shorter than two ticks unless its minSessionTimeout is lowered, so the
// leader's pings come every S/4 or more often; a session of three ticks or
// more leaves room for their delay.
func touchLag(session time.Duration) time.Duration { return session / 4 }

// record keeps t unless a touch kept was sent less than gap before it.
func (ts *touches) record(t touch, gap time.Duration) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if n := len(ts.recs); n > 0 && t.sent.Sub(ts.recs[n-1].sent) < gap {
		return
	}
	if len(ts.recs) == maxTouches {
		ts.recs = append(ts.recs[:0], ts.recs[1:]...)
	}
	ts.recs = append(ts.recs, t)
}

// latest returns the touch of session sent last, if any.
func (ts *touches) latest(session int64) (touch, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i := len(ts.recs) - 1; i >= 0; i-- {
		if ts.recs[i].session == session {
			return ts.recs[i], true
		}
	}
	return touch{}, false
}

// before returns when the latest touch of session answered at least lag
// before sent was sent.
func (ts *touches) before(sent time.Time, session int64, lag time.Duration) (time.Time, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i := len(ts.recs) - 1; i >= 0; i-- {
		r := ts.recs[i]
		if r.session == session && !r.answered.After(sent.Add(-lag)) {
			return r.sent, true
		}
	}
	return time.Time{}, false
}

// validFrom returns the moment from which the leader counts session's
// timeout, as proved by a request of session sent at sent and since
// answered; false when nothing proves one.
func (b *backend) validFrom(sent time.Time, session int64) (time.Time, bool) {
	from, ok := b.touches.before(sent, session, touchLag(b.SessionTimeout()))
	if !b.sessionsFrom.IsZero() && (!ok || b.sessionsFrom.After(from)) {
		// Every session of the connection was made after sessionsFrom.
		from, ok = b.sessionsFrom, true
	}
	return from, ok
}

// proveValidity returns the moment from which the leader counts session's
// timeout as of a request sent at sent and answered, for a grant. When
// nothing proves one less than S/2 old (a session met at New, a new one, or
// a URL's Locker whose connection is old and whose session is new), it
// waits until a sync of session is touchLag old and syncs again: the first
// sync's touch has then reached the leader. A grant that counted from an
// older moment would leave the holder little of its TTL, or none (a late
// grant, given back).
func (b *backend) proveValidity(ctx context.Context, sent time.Time, session int64) (time.Time, error) {
	for {
		if from, ok := b.validFrom(sent, session); ok && time.Since(from) < b.SessionTimeout()/2 {
			return from, nil
		}
		if t, ok := b.touches.latest(session); ok {
			wait := time.NewTimer(time.Until(t.answered.Add(touchLag(b.SessionTimeout()))))
			select {
			case <-wait.C:
			case <-ctx.Done():
				wait.Stop()
				return time.Time{}, ctx.Err()
			case <-b.closing:
				wait.Stop()
				return time.Time{}, errClosed
			}
		}
		var err error
		if sent, err = b.syncNow(ctx); err != nil {
			return time.Time{}, err
		}
		if now := b.conn.SessionID(); now != session {
			return time.Time{}, fmt.Errorf("%w: session %#x ended (the connection has %#x) while its validity was proved", errVanished, session, now)
		}
	}
}

// syncNow syncs with the leader (quorumSync) and returns when it asked.
func (b *backend) syncNow(ctx context.Context) (time.Time, error) {
	now := time.Now()
	return now, b.do(ctx, func() error { return b.quorumSync(now) })
}

// keepTouches syncs whenever the connection has gone touchLag/4 without
// one, so that a refresh or a grant always finds a touch to count from
// that is at most about 1.25 touchLag older than itself: a sync is one
// request to the leader, about 16 per session timeout when nothing else
// syncs.
func (b *backend) keepTouches() {
	defer b.wg.Done()
	for {
		every := touchLag(b.SessionTimeout()) / 4
		if every <= 0 {
			every = 10 * time.Millisecond
		}
		select {
		case <-b.closing:
			return
		case <-time.After(every):
		}
		session := b.conn.SessionID()
		if session == 0 {
			continue
		}
		if t, ok := b.touches.latest(session); ok && time.Since(t.sent) < every {
			continue
		}
		_, _ = b.syncNow(b.ctx)
	}
}
