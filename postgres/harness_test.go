package postgres_test

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/postgres"
)

// harness gives the conformance suite Lockers over one database, each with
// its own pool, whose connections can be made to die (Crash) without the
// server noticing: the sockets stay open, so the server keeps the lock
// transactions until their idle timeout, as it would for a frozen client.
type harness struct {
	dsn     string
	ttl     time.Duration
	maxHeld int
	opts    []locker.Option // of every Locker (the mode)
	// minConns, if not 0, is each pool's MinConns: connections dialled
	// ahead, where dialling is slow (TLS and SCRAM).
	minConns int32

	admin *pgxpool.Pool // for Queued

	mu      sync.Mutex
	dialers map[locker.Locker]*crashDialer
}

func newHarness(t *testing.T, dsn string) *harness {
	budget, err := postgres.DefaultBudget(ctxT(t, 30*time.Second), dsn)
	if err != nil {
		t.Fatal(err)
	}
	// A TTL of 2 s, as the other servers' harnesses: with 500 ms, a loaded
	// CI run (load 15–23, 2026-12-01) had two leases end while refreshed.
	return &harness{dsn: dsn, ttl: 2 * time.Second, maxHeld: budget, admin: newPool(t, dsn), dialers: map[locker.Locker]*crashDialer{}}
}

// Queued implements conformance.Queuer: the sessions of the harness's
// database (the suite's alone) waiting for a lock, a row's or an advisory
// one.
func (h *harness) Queued(ctx context.Context, _ *testing.T) (int, error) {
	var n int
	err := h.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
	return n, err
}

func (h *harness) TTL() time.Duration { return h.ttl }

// MaxHeld is the default connection budget of a Locker on the test server.
func (h *harness) MaxHeld() int { return h.maxHeld }

// FIFO: waiters for a row lock queue on the tuple's heavyweight lock, which
// PostgreSQL grants in arrival order.
func (h *harness) FIFO() bool { return true }

func (h *harness) NewLocker(ctx context.Context, t *testing.T, opts ...locker.Option) (locker.Locker, error) {
	pc, err := pgxpool.ParseConfig(h.dsn)
	if err != nil {
		return nil, err
	}
	// The pool is larger than the budget: the default budget is what
	// bounds the Locker (MaxHeld).
	pc.MaxConns = 1000
	pc.MinConns = h.minConns
	d := &crashDialer{}
	t.Cleanup(d.closeAll)
	pc.ConnConfig.DialFunc = d.dial
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	t.Cleanup(pool.Close)
	l, err := postgres.New(pool, append(append([]locker.Option(nil), h.opts...), opts...)...)
	if err != nil {
		return nil, err
	}
	// Like a long-lived client (and like Open, which pings), start warm:
	// connected, schema checked, token floor checked. Otherwise a new
	// client's first Acquire spends several round trips, and a backend fork
	// on the server, before it joins the lock queue, which on a loaded
	// machine upsets the arrival order the FIFO test sets up.
	if err := conformance.WarmUp(ctx, l); err != nil {
		_ = l.Close()
		return nil, err
	}
	h.mu.Lock()
	h.dialers[l] = d
	h.mu.Unlock()
	return l, nil
}

func (h *harness) Crash(t *testing.T, l locker.Locker) {
	h.mu.Lock()
	d := h.dialers[l]
	h.mu.Unlock()
	if d == nil {
		t.Fatalf("Crash of a Locker the harness did not make")
	}
	d.crash()
}

func (h *harness) NewUnreachableLocker(ctx context.Context, _ *testing.T) (locker.Locker, error) {
	// Port 1 on loopback: connection refused.
	return locker.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5")
}

var errCrashed = errors.New("harness: client crashed")

// crashDialer dials real TCP connections that can all be frozen at once.
type crashDialer struct {
	net.Dialer
	mu      sync.Mutex
	crashed bool
	conns   []net.Conn
}

func (d *crashDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.isCrashed() {
		return nil, errCrashed
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return &crashConn{Conn: c, d: d}, nil
}

func (d *crashDialer) isCrashed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashed
}

// crash makes every read and write fail from now on, waking reads in
// progress, while the sockets stay open.
func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		_ = c.SetDeadline(time.Now())
	}
}

// closeAll closes the real sockets when the test ends.
func (d *crashDialer) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
}

type crashConn struct {
	net.Conn
	d *crashDialer
}

func (c *crashConn) Read(b []byte) (int, error) {
	if c.d.isCrashed() {
		return 0, errCrashed
	}
	n, err := c.Conn.Read(b)
	if c.d.isCrashed() {
		return 0, errCrashed
	}
	return n, err
}

func (c *crashConn) Write(b []byte) (int, error) {
	if c.d.isCrashed() {
		return 0, errCrashed
	}
	return c.Conn.Write(b)
}

// Close of a crashed client's connection sends nothing: the server must
// find out by itself.
func (c *crashConn) Close() error {
	if c.d.isCrashed() {
		return nil
	}
	return c.Conn.Close()
}

func (c *crashConn) SetDeadline(t time.Time) error {
	if c.d.isCrashed() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *crashConn) SetReadDeadline(t time.Time) error {
	if c.d.isCrashed() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *crashConn) SetWriteDeadline(t time.Time) error {
	if c.d.isCrashed() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// stallDialer dials real TCP connections whose writes can be made to block,
// as on a full send buffer (a server that stopped reading), until the
// connection's write deadline passes or it is closed.
type stallDialer struct {
	net.Dialer
	mu      sync.Mutex
	stalled bool
	waiting int           // writes blocked now
	changed chan struct{} // closed (and replaced) on every change of the above
}

func (d *stallDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, d: d, changed: make(chan struct{})}, nil
}

func (d *stallDialer) notify() {
	if d.changed != nil {
		close(d.changed)
	}
	d.changed = make(chan struct{})
}

func (d *stallDialer) stall() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stalled = true
	d.notify()
}

// waitStalled returns once n writes are blocked.
func (d *stallDialer) waitStalled(t *testing.T, n int) {
	t.Helper()
	give := time.After(30 * time.Second)
	for {
		d.mu.Lock()
		if d.changed == nil {
			d.notify()
		}
		waiting, ch := d.waiting, d.changed
		d.mu.Unlock()
		if waiting >= n {
			return
		}
		select {
		case <-ch:
		case <-give:
			t.Fatalf("%d writes blocked, want %d", waiting, n)
		}
	}
}

type stallConn struct {
	net.Conn
	d *stallDialer

	mu       sync.Mutex
	deadline time.Time     // write deadline
	closed   bool          //
	changed  chan struct{} // closed (and replaced) when either changes
}

func (c *stallConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	stalled := c.d.stalled
	if stalled {
		c.d.waiting++
		c.d.notify()
	}
	c.d.mu.Unlock()
	if !stalled {
		return c.Conn.Write(b)
	}
	defer func() {
		c.d.mu.Lock()
		c.d.waiting--
		c.d.notify()
		c.d.mu.Unlock()
	}()
	for {
		c.mu.Lock()
		deadline, closed, ch := c.deadline, c.closed, c.changed
		c.mu.Unlock()
		if closed {
			return 0, net.ErrClosed
		}
		var expired <-chan time.Time
		if !deadline.IsZero() {
			timer := time.NewTimer(time.Until(deadline))
			defer timer.Stop()
			expired = timer.C
		}
		select {
		case <-ch:
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (c *stallConn) setDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.changed)
		c.changed = make(chan struct{})
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
