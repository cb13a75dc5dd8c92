package zookeeper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// testTTL is the session timeout, and so the TTL, of the test Lockers: short,
// but far above loopback round trips and JVM pauses.
const testTTL = 2 * time.Second

// steadySession is the session timeout of a Locker whose session the test
// is not about: long enough that a loaded machine's late replies never end
// it.
const steadySession = 15 * time.Second

// freshRoot returns a root path no other test uses: the ZooKeeper server is
// shared by the whole test binary.
func freshRoot(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "/locker-test/" + hex.EncodeToString(b[:])
}

// killDialer dials the servers for one Locker and can cut it off for good,
// as if its process died: its connections close and new ones are refused.
type killDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

var errKilled = errors.New("test: client killed")

func (d *killDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errKilled
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		_ = c.Close()
	}
}

// zkURL is the URL of a Locker over servers under root, whose session
// timeout (and so TTL) is testTTL.
func zkURL(servers []string, root string) string {
	return "zookeeper://" + strings.Join(servers, ",") + root + "?session_timeout=" + testTTL.String()
}

// dial returns a Locker of testTTL over servers under root, through the URL
// (a connection of its own), closed when the test ends.
func dial(t testing.TB, servers []string, root string, opts ...locker.Option) locker.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := locker.Open(ctx, zkURL(servers, root), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// quiet discards go-zookeeper's log lines.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// dialWith connects to servers with a session timeout of ttl through dialer
// (nil: net.DialTimeout) and returns New's Locker under root over that
// connection, given its events, and the connection. The Locker's Close
// closes the connection too.
func dialWith(servers []string, root string, ttl time.Duration, dialer zk.Dialer, opts ...locker.Option) (locker.Locker, *zk.Conn, error) {
	if dialer == nil {
		dialer = net.DialTimeout
	}
	conn, events, err := zk.Connect(servers, ttl, zk.WithDialer(dialer), zk.WithLogger(quiet{}))
	if err != nil {
		return nil, nil, err
	}
	l, err := zookeeper.NewOwning(conn, append([]locker.Option{
		zookeeper.WithRoot(root), zookeeper.WithSessionTimeout(ttl), zookeeper.WithEvents(events),
	}, opts...)...)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return l, conn, nil
}

// rawConn returns a bare go-zookeeper connection with a session, closed when
// the test ends. onEvent, if not nil, sees every event of the connection.
func rawConn(t testing.TB, servers []string, onEvent func(zk.Event)) *zk.Conn {
	t.Helper()
	return rawConnSession(t, servers, testTTL, onEvent)
}

// rawConnSession is rawConn with a session timeout of its own.
func rawConnSession(t testing.TB, servers []string, timeout time.Duration, onEvent func(zk.Event)) *zk.Conn {
	t.Helper()
	session := make(chan struct{})
	var once sync.Once
	cb := func(ev zk.Event) {
		if ev.State == zk.StateHasSession {
			once.Do(func() { close(session) })
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	c, _, err := zk.Connect(servers, timeout, zk.WithLogInfo(false), zk.WithEventCallback(cb))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	select {
	case <-session:
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("zk.Connect: no session with %v", servers)
		return nil
	}
}
