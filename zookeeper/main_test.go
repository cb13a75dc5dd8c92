package zookeeper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
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

// dial returns a Locker of testTTL over servers under root, closed when the
// test ends.
func dial(t testing.TB, servers []string, root string, opts ...locker.Option) *zookeeper.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := zookeeper.Dial(ctx, servers, zookeeper.Config{Root: root, SessionTimeout: testTTL}, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// rawConn returns a bare go-zookeeper connection with a session, closed when
// the test ends. onEvent, if not nil, sees every event of the connection.
func rawConn(t testing.TB, servers []string, onEvent func(zk.Event)) *zk.Conn {
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
	c, _, err := zk.Connect(servers, testTTL, zk.WithLogInfo(false), zk.WithEventCallback(cb))
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
