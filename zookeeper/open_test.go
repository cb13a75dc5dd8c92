package zookeeper_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

func TestOpen_MalformedURL_ErrInvalidURLNamingThePart(t *testing.T) {
	for _, u := range []string{
		"zookeeper:///root",                        // no host
		"zookeeper://h:99999/root",                 // port out of range
		"zookeeper://h:2181,:2181/root",            // empty host
		"zookeeper://h:2181/root/../x",             // .. in the root
		"zookeeper://h:2181//x",                    // empty segment
		"zookeeper://h:2181/r?session_timeout=abc", // not a duration
		"zookeeper://h:2181/r?connect_timeout=-1s", // not positive
		"zookeeper://h:2181/r?bogus=1",             // unknown parameter
		"zookeeper://user@h:2181/r",                // user without password
		"zookeeper://a%3Ab:pw@h:2181/r",            // ':' in the user name
		"zookeeper://h:2181/r?ca_file=/nowhere",    // unreadable CA file
		"zookeeper://h:2181/r?cert_file=/c.pem",    // certificate without key
		"zookeeper://h:2181/r?tls=maybe",           // not a boolean
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := locker.Open(ctx, u)
		cancel()
		if !errors.Is(err, locker.ErrInvalidURL) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", u, err)
		}
	}
}

func TestOpen_URL_SessionTimeoutIsTheTTL(t *testing.T) {
	addr := testenv.ZooKeeper(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A lease counts from just before the connection was made (see
	// touch.go), so the deadline is measured from before Open. The session
	// is 6 s, not shorter: its receive timeout (two thirds of it) must
	// outlast a loaded machine's slow reply (stop 44's CI run lost a 3 s
	// session's connection here).
	start := time.Now()
	l, err := locker.Open(ctx, "zookeeper://"+addr+freshRoot(t)+"?session_timeout=6s&ttl=1s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	// ttl=1s is rounded up to the 6s session timeout, never down.
	if d := lease.Deadline().Sub(start); d < 4*time.Second {
		t.Fatalf("deadline %v after Open began, want the 6s session timeout (less drift and S/4 at most), not the 1s ttl", d)
	}
}

func TestNew_Options_RefusedWhereTheyMeanNothing(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	conn := rawConn(t, addr, nil)
	root := zookeeper.WithRoot(freshRoot(t))
	for name, opts := range map[string][]locker.Option{
		"no session timeout": {root},
		"connect timeout":    {root, zookeeper.WithSessionTimeout(testTTL), zookeeper.WithConnectTimeout(time.Second)},
		"bad root":           {zookeeper.WithRoot("x"), zookeeper.WithSessionTimeout(testTTL)},
		"empty ACL":          {root, zookeeper.WithSessionTimeout(testTTL), zookeeper.WithACL(nil)},
		"digest":             {root, zookeeper.WithSessionTimeout(testTTL), zookeeper.WithDigest("u", "p")},
		"TLS":                {root, zookeeper.WithSessionTimeout(testTTL), zookeeper.WithTLS(&tls.Config{})},
		"dialer":             {root, zookeeper.WithSessionTimeout(testTTL), zookeeper.WithDialer(net.DialTimeout)},
	} {
		if l, err := zookeeper.New(conn, opts...); !errors.Is(err, locker.ErrInvalidOption) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("New with %s = %v, want ErrInvalidOption", name, err)
		}
	}
	ctx := ctxT(t, 30*time.Second)
	if l, err := locker.Open(ctx, zkURL(addr, freshRoot(t)), zookeeper.WithEvents(make(chan zk.Event))); !errors.Is(err, locker.ErrInvalidOption) {
		if l != nil {
			_ = l.Close()
		}
		t.Errorf("Open with WithEvents = %v, want ErrInvalidOption", err)
	}
}

// A shorter TTL is rounded up to the session timeout, and GrantedTTL says
// so.
func TestGrantedTTL_IsTheSessionTimeout(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	conn := rawConn(t, addr, nil)
	l, err := zookeeper.New(conn, zookeeper.WithRoot(freshRoot(t)), zookeeper.WithSessionTimeout(testTTL), locker.WithTTL(testTTL/4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := ctxT(t, 10*time.Second)
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if got := locker.GrantedTTL(lease); got != testTTL {
		t.Fatalf("GrantedTTL = %v, want the session timeout %v", got, testTTL)
	}
}

// lines is a slog.Handler keeping the messages it is given.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (h *lines) Enabled(context.Context, slog.Level) bool { return true }
func (h *lines) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.got = append(h.got, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *lines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lines) WithGroup(string) slog.Handler      { return h }

// locker.WithLogger reaches go-zookeeper's own log for a URL's connection.
func TestOpen_WithLogger_GetsGoZookeepersLog(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	h := &lines{}
	l, err := locker.Open(ctxT(t, 30*time.Second), zkURL(addr, freshRoot(t)), locker.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.got {
		if strings.HasPrefix(m, "zookeeper: authenticated") {
			return
		}
	}
	t.Fatalf("log lines %q: no go-zookeeper session line", h.got)
}

// A server that closes every connection before granting a session — here
// because the client's address is past maxClientCnxns, which is 60 by
// default and met by 60 processes on one host (a lockctl bench run met it
// with 64 Lockers) — fails Open with ErrUnavailable saying so, not only
// with the context's deadline.
func TestOpen_ServerClosesConnectionsBeforeASession_ErrorSaysWhy(t *testing.T) {
	srv := testenv.Private(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img testenv.Images, port int) launch.Spec {
		return launch.ZooKeeper(img.Server, port, launch.ZooKeeperOptions{Servers: "maxClientCnxns=1\n"})
	})
	ctx := ctxT(t, time.Minute)
	u := "zookeeper://" + srv.Addr() + "/?connect_timeout=3s"
	first, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatalf("the first Locker: %v", err)
	}
	defer first.Close()
	second, err := locker.Open(ctx, u)
	if err == nil {
		second.Close()
		t.Fatal("a second Locker got a session past maxClientCnxns=1")
	}
	if !errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), "closed the connection before granting a session") {
		t.Fatalf("Open past maxClientCnxns = %v, want ErrUnavailable saying the server closed the connection", err)
	}
	t.Log(err)
}
