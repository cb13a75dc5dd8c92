package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// sharedConns is how many shared connections an advisory Locker opens per
// TTL at most (fewer if its connection budget is smaller: all of them
// together leave one connection of the budget for waiting).
const sharedConns = 4

// spreadLocks is how many locks an idle shared session holds before a new
// lock goes to a new shared session instead, while the class may open one.
// Every statement on a session costs the server about 40 ns per advisory
// lock the session holds (PostgreSQL 15, measured: a SELECT on a session
// holding 10,000 took 387 µs more), so locks taken one after another,
// which would all go to the first idle session, are spread over the
// class's sessions.
const spreadLocks = 256

// maxSpares sizes the channel of an advisory Locker's spare sessions (see
// spare). Each spare keeps its slot of the connection budget, so the budget
// is what bounds them; a spare past this size is closed.
const maxSpares = 1024

// spareIdle is how long a spare session is kept unused before it is
// closed: a burst of waiters leaves its sessions to the next burst, not
// to the Locker's whole life.
var spareIdle = time.Minute

// advStatementTimeout bounds one statement on a shared connection. Such a
// statement never waits for a lock, so it is not cut short by the caller's
// context (pgx would close the connection, losing every lock on it); a
// statement that takes longer than this means the connection is broken.
const advStatementTimeout = 15 * time.Second

// advBackend is the driver.Backend of the advisory mode: a lock is a
// session-level advisory lock on a 64-bit hash of the key, held by one of a
// few shared sessions (or by the session of the Acquire that waited for it).
type advBackend struct {
	b *backend // the pool, names, budget, schema and token floor

	mu       sync.Mutex
	classes  map[time.Duration][]*session // shared sessions by TTL
	opening  map[time.Duration]int        // shared sessions being opened, by TTL
	opened   chan struct{}                // closed (and replaced) when one is
	nShared  int                          // shared sessions, open or opening, of every TTL
	held     map[int64]int                // advisory keys held (or being tried) on shared sessions
	sessions map[*session]struct{}        // every open session, for Close
	closed   bool

	// spares are waiters' own sessions that hold nothing, kept open (each
	// with its slot of the budget) for the next waiter: opening one costs
	// a new server process and four round trips, which a handoff between
	// waiters paid every time (24 handoffs a second at W = 8, against
	// pg_advisory_lock's 1,315 on pooled connections). sweep, while armed,
	// closes those unused for spareIdle; it counts in sweeping while armed
	// or running, so that Close waits for it.
	spares   chan *session
	sweep    *time.Timer
	sweeping sync.WaitGroup
}

func newAdvisory(b *backend) *advBackend {
	return &advBackend{b: b, classes: map[time.Duration][]*session{}, opening: map[time.Duration]int{}, opened: make(chan struct{}), held: map[int64]int{}, sessions: map[*session]struct{}{}, spares: make(chan *session, maxSpares)}
}

// The advisory mode has none of the optional abilities but TTLRounder.
var _ driver.TTLRounder = (*advBackend)(nil)

func (a *advBackend) Name() string { return Scheme }

// RoundTTL: idle_session_timeout counts whole milliseconds up to the
// largest int32, like idle_in_transaction_session_timeout.
func (a *advBackend) RoundTTL(ttl time.Duration) (time.Duration, error) { return a.b.RoundTTL(ttl) }

// advisoryKey is the advisory lock of key: a hash of the table and the key,
// apart from the watch locks of the FOR UPDATE mode (watchLock).
func (a *advBackend) advisoryKey(key string) int64 {
	sum := sha256.Sum256([]byte("advisory\x00" + a.b.n.table + "\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

var errClosed = errors.New("postgres: locker closed")

// session is one pinned connection and the advisory locks it holds.
type session struct {
	a      *advBackend
	conn   *pgxpool.Conn
	st     *connState
	shared bool
	ttl    time.Duration // the shared class

	turn chan struct{} // one statement at a time

	mu      sync.Mutex
	locks   map[*advLock]struct{}
	timeout time.Duration // idle_session_timeout now set (0: off)
	dead    error
	// idleFrom is when the session became a spare (retire); only the
	// holder of the spare reads or writes it.
	idleFrom time.Time
	// refresh is the next refresh statement, not yet started: the
	// Refreshes of the session's locks that come before it starts share
	// it (see advLock.Refresh).
	refresh *refreshCall
}

// refreshCall is one refresh statement shared by the Refreshes that joined
// it; done closes when it ran, err then being its outcome.
type refreshCall struct {
	ttl  time.Duration // the longest TTL asked for
	done chan struct{}
	err  error
}

// open pins a pool connection (the caller holds a slot) and prepares it.
func (a *advBackend) open(ctx context.Context, shared bool, ttl time.Duration) (*session, error) {
	conn, err := a.b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("getting a pool connection: %w", err)
	}
	s := &session{a: a, conn: conn, shared: shared, ttl: ttl, turn: make(chan struct{}, 1), locks: map[*advLock]struct{}{}}
	err = a.b.ensureSchema(ctx, conn.Conn())
	if err == nil {
		s.st, err = a.b.firstUse(ctx, conn.Conn())
	}
	if err == nil && !s.st.idleSession {
		err = errors.New("the advisory mode needs idle_session_timeout (PostgreSQL 14 or later)")
	}
	if err == nil {
		// Only the caller's context bounds a wait; only the TTL of silence
		// bounds a hold.
		_, err = conn.Exec(ctx, "SELECT set_config('lock_timeout', '0', false), set_config('statement_timeout', '0', false), "+
			"set_config('idle_in_transaction_session_timeout', '0', false), set_config('application_name', $1, false)", appPrefix+"advisory")
	}
	if err != nil {
		err = endedOr(conn.Conn(), err)
		closeConn(conn)
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		closeConn(conn)
		return nil, errClosed
	}
	a.sessions[s] = struct{}{}
	return s, nil
}

// sharedSession returns a shared session of ttl's class: the idle one
// holding the fewest locks, unless it holds spreadLocks or more and the
// class has fewer than sharedConns (then a new one); with none idle, a new
// one while the class has fewer than sharedConns, or the least loaded busy
// one.
func (a *advBackend) sharedSession(ctx context.Context, ttl time.Duration) (*session, error) {
	slots, err := a.b.budget(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, errClosed
	}
	class := a.classes[ttl]
	var idle *session // the idle session holding the fewest locks, idleLocks
	idleLocks := 0
	for _, s := range class {
		if len(s.turn) != 0 {
			continue
		}
		if n := s.count(); idle == nil || n < idleLocks {
			idle, idleLocks = s, n
		}
	}
	if idle != nil && idleLocks < spreadLocks {
		a.mu.Unlock()
		return idle, nil
	}
	// Shared sessions leave one connection of the budget for a waiting
	// Acquire (unless the budget is one): they are kept until Close.
	grow := len(class)+a.opening[ttl] < sharedConns && a.nShared < max(1, cap(slots)-1)
	if grow {
		select {
		case slots <- struct{}{}:
		default:
			// The budget's slots may be with spare sessions: one becomes
			// the class's new shared session, slot and all.
			if s := a.spare(); s != nil {
				s.shared, s.ttl = true, ttl
				a.nShared++
				a.classes[ttl] = append(class, s)
				a.mu.Unlock()
				return s, nil
			}
			grow = false
		}
	}
	if !grow && idle != nil {
		a.mu.Unlock()
		return idle, nil
	}
	if !grow && len(class) == 0 && a.opening[ttl] > 0 {
		// Another call is opening the class's first session: wait for it.
		opened := a.opened
		a.mu.Unlock()
		select {
		case <-opened:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return a.sharedSession(ctx, ttl)
	}
	if !grow {
		defer a.mu.Unlock()
		if len(class) == 0 {
			return nil, fmt.Errorf("%w (max_conns=%d)", ErrPoolExhausted, cap(slots))
		}
		// The least loaded.
		best := class[0]
		for _, s := range class[1:] {
			if s.count() < best.count() {
				best = s
			}
		}
		return best, nil
	}
	a.opening[ttl]++
	a.nShared++
	a.mu.Unlock()
	s, err := a.open(ctx, true, ttl)
	a.mu.Lock()
	a.opening[ttl]--
	close(a.opened)
	a.opened = make(chan struct{})
	if err == nil {
		a.classes[ttl] = append(a.classes[ttl], s)
	} else {
		a.nShared--
	}
	a.mu.Unlock()
	if err != nil {
		a.b.freeSlot()
		return nil, err
	}
	return s, nil
}

func (s *session) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}

// run runs f on the session's connection, one statement at a time. f runs
// on a context the caller's does not cancel (see advStatementTimeout),
// unless wait: then waitOn cancels it with a cancel request. An error that
// leaves the connection closed, or finds another server, ends the session
// and every lock on it.
func (s *session) run(ctx context.Context, wait bool, f func(context.Context, *pgx.Conn) error) error {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.turn }()
	return s.runTurn(ctx, wait, f)
}

// runTurn is run for a caller that has the session's turn.
func (s *session) runTurn(ctx context.Context, wait bool, f func(context.Context, *pgx.Conn) error) error {
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if dead != nil {
		return dead
	}
	conn := s.conn.Conn()
	var err error
	if wait {
		err = waitOn(ctx, conn, true, func(c context.Context) error { return f(c, conn) })
	} else {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), advStatementTimeout)
		err = f(c, conn)
		cancel()
	}
	switch {
	case err == nil:
	case errors.Is(err, errWrongServer):
		s.kill(err)
	case conn.IsClosed():
		err = endedOr(conn, err)
		s.kill(fmt.Errorf("postgres: the connection of advisory locks ended: %w", err))
	}
	return err
}

// kill ends the session: its connection is closed, which ends every lock
// on it on the server, and each lock's holder is told.
func (s *session) kill(cause error) {
	s.mu.Lock()
	if s.dead != nil {
		s.mu.Unlock()
		return
	}
	s.dead = cause
	locks := s.locks
	s.locks = map[*advLock]struct{}{}
	s.mu.Unlock()
	a := s.a
	a.mu.Lock()
	delete(a.sessions, s)
	if s.shared {
		a.nShared--
		class := a.classes[s.ttl]
		for i, c := range class {
			if c == s {
				a.classes[s.ttl] = append(class[:i:i], class[i+1:]...)
				break
			}
		}
		for l := range locks {
			a.unhold(l.key)
		}
	}
	a.mu.Unlock()
	closeConn(s.conn)
	a.b.freeSlot()
	for l := range locks {
		a.b.log.Debug("postgres: the connection holding advisory locks ended", "err", cause)
		l.lost(cause)
	}
}

// unhold forgets a hold (or try) of key on a shared session; a.mu is held.
func (a *advBackend) unhold(key int64) {
	if a.held[key]--; a.held[key] <= 0 {
		delete(a.held, key)
	}
}

// advLock is one advisory lock held by a session.
type advLock struct {
	s     *session
	key   int64
	token uint64
	start time.Time
	lost  func(error)
}

func (l *advLock) Token() uint64    { return l.token }
func (l *advLock) Start() time.Time { return l.start }

// timeoutAfterGrant is the session's idle_session_timeout once it holds
// one more lock of ttl: never lowered while it holds locks (each lock's
// holder counts on its own TTL of silence).
func (s *session) timeoutAfterGrant(ttl time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.locks) == 0 {
		return ttl
	}
	return max(s.timeout, ttl)
}

// tryOnSQL takes the advisory lock $1 if free and then, only if granted,
// the next token from sequence $2, with the server's identity and the
// session's idle timeout ($3 if granted, else $4), in one statement.
const tryOnSQL = "SELECT n, " + identSQL + ", set_config('idle_session_timeout', CASE WHEN n IS NULL THEN $4 ELSE $3 END, false) " +
	"FROM (SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval($2::regclass) END AS n) AS t"

// waitOnSQL waits for the advisory lock $1 and then takes the next token:
// the lock is the subquery's, evaluated before the outer projection.
const waitOnSQL = "SELECT n, " + identSQL + ", set_config('idle_session_timeout', $3, false) " +
	"FROM (SELECT nextval($2::regclass) AS n FROM (SELECT pg_advisory_lock($1)) AS l) AS t"

func (a *advBackend) TryAcquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer authz(&err)
	return a.try(ctx, req)
}

func (a *advBackend) try(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	key := a.advisoryKey(req.Key)
	// A session-level advisory lock is re-entrant: the session that holds
	// it would be granted it again. So this Locker never tries a key it
	// holds on a shared session; it is held, by another of its leases.
	a.mu.Lock()
	if a.held[key] > 0 {
		a.mu.Unlock()
		return nil, locker.ErrLocked
	}
	a.held[key]++
	a.mu.Unlock()
	l, err := onLiveConn(ctx, a.b, func() (*advLock, error) { return a.tryShared(ctx, req, key) })
	if err != nil {
		a.mu.Lock()
		a.unhold(key)
		a.mu.Unlock()
		return nil, err
	}
	return l, nil
}

func (a *advBackend) tryShared(ctx context.Context, req *driver.Request, key int64) (*advLock, error) {
	s, err := a.sharedSession(ctx, req.TTL)
	if err != nil {
		return nil, err
	}
	l := &advLock{s: s, key: key, lost: req.Lost}
	err = s.run(ctx, false, func(c context.Context, conn *pgx.Conn) error {
		s.mu.Lock()
		before := s.timeout
		if len(s.locks) == 0 {
			before = 0
		}
		s.mu.Unlock()
		after := s.timeoutAfterGrant(req.TTL)
		l.start = time.Now()
		var n *int64
		var id serverIdent
		if err := conn.QueryRow(c, tryOnSQL, key, a.b.n.sequence, millis(after), millis(before)).Scan(&n, &id.start, &id.replayed, nil); err != nil {
			return fmt.Errorf("postgres: trying an advisory lock: %w", err)
		}
		if n == nil {
			return locker.ErrLocked
		}
		s.mu.Lock()
		s.locks[l] = struct{}{}
		s.timeout = after
		s.mu.Unlock()
		tok, err := s.aboveFloor(c, conn, *n, id)
		if err != nil {
			return err
		}
		l.token = tok
		return nil
	})
	if err != nil {
		if !errors.Is(err, locker.ErrLocked) {
			s.drop(l)
		}
		return nil, err
	}
	if ctx.Err() != nil {
		// Granted as the caller gave up: give it back.
		_ = l.unlock(context.WithoutCancel(ctx))
		return nil, ctx.Err()
	}
	return l, nil
}

// drop forgets l if the session still holds it, unlocking it on the
// server best-effort (a failed statement kills the session anyway).
func (s *session) drop(l *advLock) {
	s.mu.Lock()
	_, ok := s.locks[l]
	s.mu.Unlock()
	if ok {
		_ = l.unlock(context.Background())
	}
}

// aboveFloor returns n if it is above the token floor of this server life
// under the identity the session checked; else it raises the floor and
// takes tokens until one is (the lock is held meanwhile).
func (s *session) aboveFloor(ctx context.Context, conn *pgx.Conn, n int64, id serverIdent) (uint64, error) {
	for attempt := 1; n <= id.floor() || id != s.st.ident; attempt++ {
		if attempt == maxAttempts {
			return 0, errors.New("postgres: the token sequence stays below the server's floor")
		}
		var err error
		if s.st.ident, err = s.a.b.raiseFloor(ctx, conn, nil); err != nil {
			return 0, err
		}
		if err := conn.QueryRow(ctx, "SELECT nextval($1::regclass), "+identSQL, s.a.b.n.sequence).Scan(&n, &id.start, &id.replayed); err != nil {
			return 0, fmt.Errorf("taking a token: %w", err)
		}
	}
	return uint64(n), nil
}

// Acquire tries on a shared session first; if the key is held, it waits in
// PostgreSQL's lock queue (pg_advisory_lock) on a session of its own, which
// then holds the lock, so waiters are served in arrival order and nobody
// polls.
func (a *advBackend) Acquire(ctx context.Context, req *driver.Request) (_ driver.Lock, err error) {
	defer authz(&err)
	l, err := a.try(ctx, req)
	if !errors.Is(err, locker.ErrLocked) {
		return l, err
	}
	slots, err := a.b.budget(ctx)
	if err != nil {
		return nil, err
	}
	return onLiveConn(ctx, a.b, func() (*advLock, error) { return a.waitOwn(ctx, req, slots) })
}

// ownSession returns a session for a waiter: a spare one, or a new one for
// which it takes a slot of the budget — or the first spare that comes back
// while it waits for a slot.
func (a *advBackend) ownSession(ctx context.Context, slots chan struct{}, ttl time.Duration) (*session, error) {
	if s := a.spare(); s != nil {
		return s, nil
	}
	for {
		select {
		case s := <-a.spares:
			if s.alive() {
				return s, nil
			}
		case slots <- struct{}{}:
			s, err := a.open(ctx, false, ttl)
			if err != nil {
				a.b.freeSlot()
				return nil, err
			}
			return s, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a connection of the budget (max_conns=%d): %w", cap(slots), ctx.Err())
		}
	}
}

// spare returns a live spare session, or nil.
func (a *advBackend) spare() *session {
	for {
		select {
		case s := <-a.spares:
			if s.alive() {
				return s
			}
		default:
			return nil
		}
	}
}

// retire keeps a waiter's own session that holds nothing as a spare, or
// closes it when there are enough spares or the Locker is closed. Its
// idle_session_timeout is off (the release set it so): a spare is not cut
// off by the server while it waits to be used again, but by the sweep once
// it has waited spareIdle.
func (a *advBackend) retire(s *session) {
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.armSweep()
	}
	a.mu.Unlock()
	if !closed && s.alive() {
		s.idleFrom = time.Now()
		select {
		case a.spares <- s:
			return
		default:
		}
	}
	s.kill(errReleased)
}

// armSweep arms the sweep of idle spares unless it is armed or running;
// the caller holds a.mu and knows the Locker is open.
func (a *advBackend) armSweep() {
	if a.sweep == nil {
		a.sweeping.Add(1)
		a.sweep = time.AfterFunc(spareIdle, a.sweepSpares)
	}
}

// sweepSpares closes the spares unused for spareIdle, and arms itself
// again while spares are left.
func (a *advBackend) sweepSpares() {
	defer a.sweeping.Done()
	var keep, idle []*session
	for n := len(a.spares); n > 0; n-- {
		var s *session
		select {
		case s = <-a.spares:
		default:
		}
		if s == nil {
			break
		}
		if s.alive() && time.Since(s.idleFrom) < spareIdle {
			keep = append(keep, s)
		} else {
			idle = append(idle, s)
		}
	}
	for _, s := range keep {
		select {
		case a.spares <- s:
		default:
			idle = append(idle, s)
		}
	}
	for _, s := range idle {
		s.kill(errReleased)
	}
	a.mu.Lock()
	a.sweep = nil
	if !a.closed && len(a.spares) > 0 {
		a.armSweep()
	}
	a.mu.Unlock()
}

func (s *session) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead == nil
}

// waitOwn waits for req.Key in PostgreSQL's lock queue on a session of its
// own, for which it takes a slot of the budget.
func (a *advBackend) waitOwn(ctx context.Context, req *driver.Request, slots chan struct{}) (*advLock, error) {
	s, err := a.ownSession(ctx, slots, req.TTL)
	if err != nil {
		return nil, err
	}
	wl := &advLock{s: s, key: a.advisoryKey(req.Key), lost: req.Lost}
	var (
		n  int64
		id serverIdent
	)
	asked := time.Now()
	err = s.run(ctx, true, func(c context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(c, waitOnSQL, wl.key, a.b.n.sequence, millis(req.TTL)).Scan(&n, &id.start, &id.replayed, nil)
	})
	if err == nil {
		s.mu.Lock()
		s.locks[wl] = struct{}{}
		s.timeout = req.TTL
		s.mu.Unlock()
		wl.start = asked
		err = s.run(ctx, false, func(c context.Context, conn *pgx.Conn) error {
			tok, err := s.aboveFloor(c, conn, n, id)
			wl.token = tok
			if err == nil && time.Since(asked) > req.TTL/4 {
				// A long wait: restart the idle timer now, so that the
				// local deadline is not cut short by the wait.
				wl.start = time.Now()
				_, err = conn.Exec(c, "SELECT 1")
			}
			return err
		})
	}
	if err != nil {
		s.kill(fmt.Errorf("postgres: waiting for an advisory lock: %w", err))
		return nil, err
	}
	return wl, nil
}

// Refresh restarts the idle timer of the lock's session (any statement
// does), raising its timeout to ttl if longer, and checks that the server
// is still the one that granted the lock.
//
// One statement does that for every lock of the session, so the Refreshes
// of its locks share one: a Refresh joins the session's next refresh
// statement if it has not started yet, and whichever of its callers gets
// the session's turn first runs it for all. A statement that starts after
// a Refresh was called restarts the idle timer after it too, which is all
// the lease's new deadline (counted from the call) needs. A session of
// 10,000 locks refreshes in a few statements per interval, not 10,000, and
// an Acquire waits behind them for its turn no longer.
func (l *advLock) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer authz(&err)
	s := l.s
	s.mu.Lock()
	if _, held := s.locks[l]; !held {
		s.mu.Unlock()
		return locker.ErrLeaseLost
	}
	call := s.refresh
	if call == nil {
		call = &refreshCall{done: make(chan struct{})}
		s.refresh = call
	}
	call.ttl = max(call.ttl, ttl)
	s.mu.Unlock()
	select {
	case s.turn <- struct{}{}:
		select {
		case <-call.done: // another caller ran it while this one waited
		default:
			call.err = s.runTurn(ctx, false, func(c context.Context, conn *pgx.Conn) error { return s.refreshOnTurn(c, conn, call) })
			close(call.done)
		}
		<-s.turn
	case <-call.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	err = call.err
	if err == nil && !l.isHeld() {
		err = locker.ErrLeaseLost
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && !errors.Is(err, locker.ErrLeaseLost):
		return err
	}
	if l.isHeld() {
		return err
	}
	if errors.Is(err, locker.ErrLeaseLost) {
		return err
	}
	return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
}

// refreshOnTurn runs call's statement; the caller has the session's turn.
// From here on, a Refresh makes a new call: this one has started.
func (s *session) refreshOnTurn(c context.Context, conn *pgx.Conn, call *refreshCall) error {
	s.mu.Lock()
	if s.refresh == call {
		s.refresh = nil
	}
	timeout := max(s.timeout, call.ttl)
	s.mu.Unlock()
	var id serverIdent
	var recovering bool
	if err := conn.QueryRow(c, "SELECT set_config('idle_session_timeout', $1, false), "+identSQL+", pg_is_in_recovery()",
		millis(timeout)).Scan(nil, &id.start, &id.replayed, &recovering); err != nil {
		return fmt.Errorf("postgres: refresh: %w", err)
	}
	s.mu.Lock()
	s.timeout = timeout
	s.mu.Unlock()
	if recovering || id != s.st.ident {
		return errWrongServer
	}
	return nil
}

var errWrongServer = errors.New("postgres: refresh: the server is not the one that granted the lock (a failover or restart behind a pooler)")

func (l *advLock) isHeld() bool {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	_, ok := l.s.locks[l]
	return ok
}

// Release unlocks the advisory lock; the session (if it was a waiter's
// own) is closed once it holds nothing.
func (l *advLock) Release(ctx context.Context) (err error) {
	defer authz(&err)
	return l.unlock(ctx)
}

// Expire implements driver.Expirer: a lock whose holder missed its
// refreshes is unlocked, as its shared session stays alive for the others.
func (l *advLock) Expire(ctx context.Context) { _ = l.unlock(ctx) }

// releaseSQL unlocks $1 and sets the session's idle timeout ($2: off once
// it holds nothing).
const releaseSQL = "SELECT pg_advisory_unlock($1), set_config('idle_session_timeout', $2, false)"

func (l *advLock) unlock(ctx context.Context) error {
	s := l.s
	var gone bool
	err := s.run(ctx, false, func(c context.Context, conn *pgx.Conn) error {
		s.mu.Lock()
		_, held := s.locks[l]
		timeout := s.timeout
		if len(s.locks) == 1 {
			timeout = 0
		}
		s.mu.Unlock()
		if !held {
			return locker.ErrLeaseLost
		}
		var ok bool
		if err := conn.QueryRow(c, releaseSQL, l.key, millis(timeout)).Scan(&ok, nil); err != nil {
			return fmt.Errorf("postgres: release: %w", err)
		}
		s.mu.Lock()
		delete(s.locks, l)
		s.timeout = timeout
		gone = len(s.locks) == 0
		s.mu.Unlock()
		if s.shared {
			s.a.mu.Lock()
			s.a.unhold(l.key)
			s.a.mu.Unlock()
		}
		if !ok {
			return fmt.Errorf("%w: postgres: the session no longer held the advisory lock", locker.ErrLeaseLost)
		}
		return nil
	})
	if !s.shared && gone {
		if err == nil {
			s.a.retire(s)
		} else {
			s.kill(errReleased)
		}
	}
	if err != nil && !errors.Is(err, locker.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", locker.ErrLeaseLost, err)
	}
	return err
}

// Close closes every session, which ends their locks on the server.
func (a *advBackend) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	all := make([]*session, 0, len(a.sessions))
	for s := range a.sessions {
		all = append(all, s)
	}
	if a.sweep != nil && a.sweep.Stop() {
		a.sweeping.Done() // it will not run
	}
	a.mu.Unlock()
	for _, s := range all {
		s.turn <- struct{}{}
		s.kill(errClosed)
		<-s.turn
	}
	a.sweeping.Wait()
	if a.b.ownPool {
		a.b.pool.Close()
	}
	return nil
}
