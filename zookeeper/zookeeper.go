package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "zookeeper"

// Defaults.
const (
	// DefaultRoot is the node under which lock directories are created.
	DefaultRoot = "/locker"
	// DefaultSessionTimeout is the session timeout a URL's connection
	// requests: the default TTL.
	DefaultSessionTimeout = locker.DefaultTTL
	// DefaultConnectTimeout bounds how long Open waits for the first session
	// when its context has no earlier deadline.
	DefaultConnectTimeout = 10 * time.Second
)

// New returns a Locker over conn, a connection the caller owns: closing the
// Locker does not close conn. WithSessionTimeout is required: the session
// timeout the server negotiated for conn, which go-zookeeper does not
// export. Give WithEvents the channel zk.Connect returned with conn so the
// Locker sees disconnections.
func New(conn *zk.Conn, opts ...locker.Option) (locker.Locker, error) {
	return newOver(conn, false, opts)
}

// newOver is New; owned makes the Locker close conn when it closes (a test
// hook: its harness hands the suite Lockers of package locker itself).
func newOver(conn *zk.Conn, owned bool, opts []locker.Option) (locker.Locker, error) {
	if conn == nil {
		return nil, fmt.Errorf("zookeeper: new: %w: nil *zk.Conn", locker.ErrInvalidOption)
	}
	bc := locker.SplitOptions(Scheme, opts)
	cfg, err := newConfig(bc)
	switch {
	case err != nil:
	case cfg.user != "" || cfg.tls != nil || cfg.dialer != nil:
		err = fmt.Errorf("%w: WithDigest, WithTLS and WithDialer are for URLs: conn is connected already (authenticate it with conn.AddAuth and give WithACL(zk.AuthACL(zk.PermAll)))", locker.ErrInvalidOption)
	case cfg.sessionTimeout == 0:
		err = fmt.Errorf("%w: WithSessionTimeout is required: the session timeout the server negotiated for conn", locker.ErrInvalidOption)
	case cfg.connectTimeout != 0:
		err = fmt.Errorf("%w: WithConnectTimeout is for URLs: conn is connected already", locker.ErrInvalidOption)
	}
	if err != nil {
		return nil, fmt.Errorf("zookeeper: new: %w", err)
	}
	b := newBackend(cfg, owned)
	b.conn = conn
	b.sessionTimeout.Store(int64(cfg.sessionTimeout))
	if cfg.events != nil {
		b.stateEvents = true
		b.wg.Add(1)
		go b.readEvents(cfg.events)
	}
	return b.locker(bc.Options)
}

// locker starts b's syncs for its leases' validity (keepTouches) and
// returns the Locker over b, or closes b (which stops them and its event
// reader, and closes its connection if it owns it) when locker.New refuses
// the options. The session timeout, every lease's TTL, goes before opts as
// the Locker's default TTL: locker.DefaultTTL may be longer, which is
// refused.
func (b *backend) locker(opts []locker.Option) (locker.Locker, error) {
	b.wg.Add(1)
	go b.keepTouches()
	l, err := locker.New(b, append([]locker.Option{locker.WithTTL(b.SessionTimeout())}, opts...)...)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return l, nil
}

// dial connects to servers ("host:port") for a URL's Locker, which owns the
// connection, and waits for a session (until ctx ends, or
// cfg.connectTimeout).
func dial(ctx context.Context, servers []string, cfg *config) (*backend, error) {
	if cfg.events != nil {
		return nil, fmt.Errorf("%w: WithEvents is for New: a URL's connection is the Locker's own", locker.ErrInvalidOption)
	}
	if cfg.sessionTimeout == 0 {
		cfg.sessionTimeout = DefaultSessionTimeout
	}
	timeout := cfg.connectTimeout
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sl := &sessionLog{log: cfg.log, ready: make(chan struct{}), secret: cfg.password}
	b := newBackend(cfg, true)
	// Before zk.Connect: every session of the connection is made later. (A
	// connection given to New may have sent its request for a session
	// already.)
	b.sessionsFrom = time.Now()
	b.stateEvents = true
	sl.timeout = &b.sessionTimeout
	// The last failed dial (a refused connection, a TLS handshake) says
	// why there is no session, which go-zookeeper only logs.
	var lastDial atomic.Pointer[error]
	dialTLS := tlsDialer(cfg.dialer, cfg.tls)
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := dialTLS(network, addr, timeout)
		if err != nil {
			lastDial.Store(&err)
			return nil, err
		}
		return b.conns.track(c)
	}
	conn, _, err := zk.Connect(servers, cfg.sessionTimeout, zk.WithLogger(sl), zk.WithLogInfo(true),
		zk.WithEventCallback(b.onEvent), zk.WithDialer(dialer))
	if err != nil {
		b.cancel()
		return nil, err
	}
	b.conn = conn
	select {
	case <-sl.ready:
	case <-ctx.Done():
		// go-zookeeper's Close waits a second for the server to confirm,
		// which an unreachable server never does: do not make the caller,
		// whose context has ended, wait for it.
		b.cancel()
		go b.closeConn()
		err := fmt.Errorf("%w: no session with %s (%w)", locker.ErrUnavailable, strings.Join(servers, ","), ctx.Err())
		if last := lastDial.Load(); last != nil {
			err = fmt.Errorf("%w; last attempt: %w", err, *last)
		} else if closed := sl.closed.Load(); closed != nil {
			err = fmt.Errorf("%w; the server closed the connection before granting a session (%s), as "+
				"ZooKeeper does while not serving (no quorum) and past maxClientCnxns connections from "+
				"one client address (60 by default)", err, *closed)
		}
		return nil, err
	}
	if cfg.user != "" {
		if err := b.authenticate(ctx, cfg.user, cfg.password); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	return b, nil
}

// sessionLog is go-zookeeper's logger for a URL's connection. It is the
// only place go-zookeeper reports the session timeout the server negotiated
// (the "authenticated" line, written after each session is established), so
// it records that value and signals the first session.
type sessionLog struct {
	log       *slog.Logger
	secret    string // the digest password: never logged, whatever go-zookeeper says
	timeout   *atomic.Int64
	ready     chan struct{}
	readyOnce sync.Once
	// closed is the last reason go-zookeeper gave for a connection the
	// server closed before a session (it logs it, and tries again).
	closed atomic.Pointer[string]
}

func (s *sessionLog) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 && s.timeout != nil {
			s.timeout.Store(int64(time.Duration(ms) * time.Millisecond))
			s.readyOnce.Do(func() { close(s.ready) })
		}
	}
	if format == "authentication failed: %s" && len(args) == 1 {
		why := redact(fmt.Sprint(args[0]), s.secret)
		s.closed.Store(&why)
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("zookeeper: " + redact(fmt.Sprintf(format, args...), s.secret))
	}
}

// backend implements driver.Backend over one *zk.Conn.
type backend struct {
	conn  *zk.Conn
	owned bool
	conns liveConns // what an owned conn dialed: closeConn ends them
	root  string
	acl   []zk.ACL
	log   *slog.Logger // WithLogger's: background work reports here

	// sessionTimeout is the negotiated session timeout, in nanoseconds.
	sessionTimeout atomic.Int64
	// stateEvents: the backend sees the connection's state changes (mon).
	stateEvents bool
	mon         monitor
	// syncing is the newest sync in flight (quorumSync).
	syncMu  sync.Mutex
	syncing *syncCall
	// touches are the answered syncs a lease's validity may start from,
	// and sessionsFrom, when not zero, a moment before every session of
	// the connection was made (touch.go).
	touches      touches
	sessionsFrom time.Time
	// plainCreate: the server refused the multi's write of a lock
	// directory's data (an ACL without write): nodes are created alone.
	plainCreate atomic.Bool
	// losses wait on the held locks' loss watches.
	losses lossWatchers

	// ctx is cancelled by Close: it stops waits, watches and clean-ups.
	ctx     context.Context
	cancel  context.CancelFunc
	closing <-chan struct{} // ctx.Done()
	// wg counts this backend's goroutines: calls abandoned by their context,
	// loss watchers and clean-ups.
	wg sync.WaitGroup
}

var (
	_ driver.Backend    = (*backend)(nil)
	_ driver.TTLRounder = (*backend)(nil)
	_ driver.Permits    = (*backend)(nil)
)

// Permits implements driver.Permits: a key's limit is stored in each of
// its queue nodes; the first limit nodes of the queue hold a permit each
// (see contend).
func (b *backend) Permits() {}

func newBackend(cfg *config, owned bool) *backend {
	b := &backend{owned: owned, root: strings.TrimSuffix(cfg.root, "/"), acl: cfg.acl, log: cfg.log}
	b.mon.locks = map[*lock]struct{}{}
	b.losses.b = b
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.closing = b.ctx.Done()
	return b
}

func (b *backend) Name() string { return Scheme }

// SessionTimeout is the session timeout negotiated with the server: the TTL
// of every lease.
func (b *backend) SessionTimeout() time.Duration { return time.Duration(b.sessionTimeout.Load()) }

// RoundTTL implements driver.TTLRounder: every lease lives exactly as long
// as the session can, so a shorter TTL is rounded up to the session timeout
// (locker.GrantedTTL shows it) and a longer one is refused. See
// docs/design/zookeeper.md, "TTL and sessions".
func (b *backend) RoundTTL(ttl time.Duration) (time.Duration, error) {
	s := b.SessionTimeout()
	if ttl > s {
		return 0, fmt.Errorf("%w: TTL %v is longer than the ZooKeeper session timeout %v: the server may expire a session, and grant its locks to others, S after it last heard from it; ask for a longer session timeout instead", locker.ErrInvalidOption, ttl, s)
	}
	return s, nil
}

func (b *backend) Close() error {
	b.cancel()
	b.mon.close()
	if b.owned {
		b.closeConn()
	}
	b.wg.Wait()
	return nil
}

// closeConn closes the owned connection. go-zookeeper's Close stops its
// loop from reconnecting (and waits up to a second for the server's
// goodbye); closing what it dialed then ends a handshake it would
// otherwise go on waiting for.
func (b *backend) closeConn() {
	b.conn.Close()
	b.conns.closeAll()
}

// do runs fn, a blocking go-zookeeper call, and returns its error, or ctx's
// error as soon as ctx ends. go-zookeeper calls take no context, so fn then
// goes on in its goroutine until ZooKeeper answers or the connection closes;
// the caller must not read what fn writes unless do returned fn's result.
func (b *backend) do(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return fn()
	}
	done := make(chan error, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errClosed is reported to waits and watches stopped by Close.
var errClosed = errors.New("zookeeper: backend closed")
