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

// Defaults of Config.
const (
	// DefaultRoot is the node under which lock directories are created.
	DefaultRoot = "/locker"
	// DefaultSessionTimeout is the session timeout Dial requests: the default
	// TTL, so that a Locker with default options works.
	DefaultSessionTimeout = locker.DefaultTTL
	// DefaultConnectTimeout bounds how long Dial waits for the first session
	// when its context has no earlier deadline.
	DefaultConnectTimeout = 10 * time.Second
)

// Config configures a Locker of this package. The zero value is usable with
// Dial; New needs SessionTimeout.
type Config struct {
	// Root is the absolute path of the node under which lock directories are
	// created (default DefaultRoot). Missing nodes on the way are created as
	// persistent nodes.
	Root string

	// SessionTimeout is, for Dial, the session timeout to request (default
	// DefaultSessionTimeout; the server bounds it). For New it is required:
	// the timeout the server negotiated for the caller's connection, which
	// go-zookeeper does not export. Every lease's TTL is this timeout.
	SessionTimeout time.Duration

	// ACL is given to every node created (default: all rights to anyone, or
	// to the digest identity when Digest is set).
	ACL []zk.ACL

	// Digest is "user:password" for digest authentication (Dial only).
	Digest string

	// Dialer makes the TCP connections to the servers (Dial only; default
	// net.DialTimeout).
	Dialer zk.Dialer

	// Events is, for New, the event channel zk.Connect returned with conn
	// (optional). When given, the Locker reads it (the caller must not): it
	// then sees disconnections, ends every lease of a session that stayed
	// disconnected too long, and so accepts TTLs longer than the session
	// timeout. Dial always watches its own connection.
	Events <-chan zk.Event

	// Logger receives go-zookeeper's log lines at debug level (Dial only;
	// default: discarded).
	Logger *slog.Logger
}

func (cfg *Config) validate() error {
	if cfg.Root == "" {
		cfg.Root = DefaultRoot
	}
	if err := validateRoot(cfg.Root); err != nil {
		return fmt.Errorf("%w: root %q: %v", locker.ErrInvalidOption, cfg.Root, err)
	}
	if cfg.SessionTimeout < 0 {
		return fmt.Errorf("%w: session timeout %v is negative", locker.ErrInvalidOption, cfg.SessionTimeout)
	}
	if cfg.Digest != "" && !strings.Contains(cfg.Digest, ":") {
		return fmt.Errorf("%w: digest must be user:password", locker.ErrInvalidOption)
	}
	if cfg.ACL == nil {
		cfg.ACL = zk.WorldACL(zk.PermAll)
		if user, pass, ok := strings.Cut(cfg.Digest, ":"); ok {
			cfg.ACL = zk.DigestACL(zk.PermAll, user, pass)
		}
	}
	return nil
}

// New returns a Locker over conn, a connection the caller owns: closing the
// Locker does not close conn. cfg.SessionTimeout must be the session timeout
// the server negotiated for conn; Dial, Open and the URL scheme learn it
// themselves. Digest, Dialer and Logger are ignored: conn was set up already.
func New(conn *zk.Conn, cfg Config, opts ...locker.Option) (*Locker, error) {
	if conn == nil {
		return nil, fmt.Errorf("zookeeper: new: %w: nil *zk.Conn", locker.ErrInvalidOption)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("zookeeper: new: %w", err)
	}
	if cfg.SessionTimeout == 0 {
		return nil, fmt.Errorf("zookeeper: new: %w: Config.SessionTimeout must be the negotiated session timeout of conn", locker.ErrInvalidOption)
	}
	b := newBackend(cfg, false)
	b.conn = conn
	b.sessionTimeout.Store(int64(cfg.SessionTimeout))
	if cfg.Events != nil {
		b.stateEvents = true
		b.wg.Add(1)
		go b.readEvents(cfg.Events)
	}
	l, err := locker.New(b, withDefaultTTL(b, opts)...)
	if err != nil {
		_ = b.Close() // stops the event reader; conn stays the caller's
		return nil, err
	}
	return &Locker{Locker: l, b: b}, nil
}

// withDefaultTTL puts the session timeout, every lease's TTL, before opts
// as the Locker's default TTL: locker.DefaultTTL may be longer, which is
// refused.
func withDefaultTTL(b *backend, opts []locker.Option) []locker.Option {
	return append([]locker.Option{locker.WithTTL(b.SessionTimeout())}, opts...)
}

// Dial connects to the ZooKeeper servers ("host:port"), waits for a session
// (until ctx ends, or DefaultConnectTimeout), and returns a Locker that owns
// the connection and closes it on Close.
func Dial(ctx context.Context, servers []string, cfg Config, opts ...locker.Option) (*Locker, error) {
	b, err := dial(ctx, servers, cfg)
	if err != nil {
		return nil, fmt.Errorf("zookeeper: dial: %w", err)
	}
	l, err := locker.New(b, withDefaultTTL(b, opts)...)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return &Locker{Locker: l, b: b}, nil
}

func dial(ctx context.Context, servers []string, cfg Config) (*backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers", locker.ErrInvalidOption)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancel()
	}
	sl := &sessionLog{log: cfg.Logger, ready: make(chan struct{})}
	if sl.log == nil {
		sl.log = slog.New(slog.DiscardHandler)
	}
	dialer := cfg.Dialer
	if dialer == nil {
		dialer = net.DialTimeout
	}
	b := newBackend(cfg, true)
	b.stateEvents = true
	sl.timeout = &b.sessionTimeout
	conn, _, err := zk.Connect(servers, cfg.SessionTimeout, zk.WithLogger(sl), zk.WithLogInfo(true),
		zk.WithDialer(dialer), zk.WithEventCallback(b.onEvent))
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
		go conn.Close()
		return nil, fmt.Errorf("%w: no session with %s (%w)", locker.ErrUnavailable, strings.Join(servers, ","), ctx.Err())
	}
	if user, pass, ok := strings.Cut(cfg.Digest, ":"); ok {
		err := b.do(ctx, func() error { return conn.AddAuth("digest", []byte(user+":"+pass)) })
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("digest authentication: %w", err)
		}
	}
	return b, nil
}

// sessionLog is go-zookeeper's logger for connections Dial makes. It is the
// only place go-zookeeper reports the session timeout the server negotiated
// (the "authenticated" line, written after each session is established), so
// it records that value and signals the first session.
type sessionLog struct {
	log       *slog.Logger
	timeout   *atomic.Int64
	ready     chan struct{}
	readyOnce sync.Once
}

func (s *sessionLog) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 && s.timeout != nil {
			s.timeout.Store(int64(time.Duration(ms) * time.Millisecond))
			s.readyOnce.Do(func() { close(s.ready) })
		}
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("zookeeper: " + fmt.Sprintf(format, args...))
	}
}

// backend implements driver.Backend over one *zk.Conn.
type backend struct {
	conn  *zk.Conn
	owned bool
	root  string
	acl   []zk.ACL

	// sessionTimeout is the negotiated session timeout, in nanoseconds.
	sessionTimeout atomic.Int64
	// stateEvents: the backend sees the connection's state changes (mon).
	stateEvents bool
	mon         monitor
	// plainCreate: the server refused the multi's write of a lock
	// directory's data (an ACL without write): nodes are created alone.
	plainCreate atomic.Bool

	// ctx is cancelled by Close: it stops waits, watches and clean-ups.
	ctx     context.Context
	cancel  context.CancelFunc
	closing <-chan struct{} // ctx.Done()
	// wg counts this backend's goroutines: calls abandoned by their context,
	// lock watchers and clean-ups.
	wg sync.WaitGroup
}

var (
	_ driver.Backend    = (*backend)(nil)
	_ driver.TTLRounder = (*backend)(nil)
)

func newBackend(cfg Config, owned bool) *backend {
	b := &backend{owned: owned, root: strings.TrimSuffix(cfg.Root, "/"), acl: cfg.ACL}
	b.mon.locks = map[*lock]struct{}{}
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
// (locker.GrantedTTL shows it) and a longer one is refused. See the package
// doc, "TTL and sessions".
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

func (b *backend) closeConn() {
	b.conn.Close()
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

// Locker is the locker.Locker that Dial and New return, with what is
// particular to ZooKeeper beside it.
type Locker struct {
	locker.Locker
	b *backend
}

// SessionTimeout is the session timeout the server negotiated: the TTL of
// every lease of this Locker (a shorter WithTTL is rounded up to it, a longer
// one refused).
func (l *Locker) SessionTimeout() time.Duration { return l.b.SessionTimeout() }

// SessionID is the id of the Locker's current ZooKeeper session (0 while
// there is none).
func (l *Locker) SessionID() int64 { return l.b.conn.SessionID() }

// errClosed is reported to waits and watches stopped by Close.
var errClosed = errors.New("zookeeper: backend closed")
