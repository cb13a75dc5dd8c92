package zookeeper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
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
	l, err := locker.Open(ctx, "zookeeper://"+addr+freshRoot(t)+"?session_timeout=3s&ttl=1s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	start := time.Now()
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	// ttl=1s is rounded up to the 3s session timeout, never down.
	if d := lease.Deadline().Sub(start); d < 2*time.Second {
		t.Fatalf("deadline %v after the start, want the 3s session timeout (less drift)", d)
	}
}

func TestNew_WithoutSessionTimeout_ErrInvalidOption(t *testing.T) {
	addr := []string{testenv.ZooKeeper(t).Addr()}
	conn := rawConn(t, addr, nil)
	if _, err := zookeeper.New(conn, zookeeper.Config{}); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("New without the session timeout = %v, want ErrInvalidOption", err)
	}
	cfg := zookeeper.Config{Root: freshRoot(t), SessionTimeout: testTTL}
	l, err := zookeeper.New(conn, cfg, locker.WithTTL(testTTL/4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.SessionTimeout(); got != testTTL {
		t.Fatalf("SessionTimeout = %v, want %v", got, testTTL)
	}
}
