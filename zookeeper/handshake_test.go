package zookeeper_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// A Locker whose connection is waiting for a handshake reply from a server
// that accepted it and says nothing (one starting up after a restart, or
// behind a dead router) leaves no connection loop running once Open has
// given up: go-zookeeper's Close leaves that loop reading until ten receive
// timeouts (100 s at the default session timeout) have passed. A
// fresh-clone CI run found four such loops after a ZooKeeper restart.
func TestOpen_HandshakeUnanswered_NoConnectionLoopLeft(t *testing.T) {
	proxy := testenv.ZooKeeper(t).Proxy(t)
	proxy.Blackhole(t)
	before := connectionLoops()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := locker.Open(ctx, "zookeeper://"+proxy.Addr()+freshRoot(t)+"?connect_timeout=1s")
	if err == nil {
		_ = l.Close()
		t.Fatal("Open through a blackholed proxy succeeded")
	}
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Open through a blackholed proxy = %v, want ErrUnavailable", err)
	}
	// Closing the connection ends the loop at once; the bound is room for a
	// loaded machine to schedule its exit, well under the library's own
	// read deadline.
	deadline := time.Now().Add(5 * time.Second)
	for connectionLoops() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d go-zookeeper connection loops still running 5 s after Open gave up (%d before it)", connectionLoops(), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectionLoops counts the goroutines running go-zookeeper's connection
// loop, one per zk.Conn.
func connectionLoops() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("github.com/go-zookeeper/zk.(*Conn).loop("))
}
