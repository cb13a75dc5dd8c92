package redis_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// splitDialer is a go-redis Dialer that dials first for a client's first
// connection and rest for every later one: a test sends one connection
// (the pool's, or the subscription's) through a proxy and not the others.
func splitDialer(first, rest string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var dials atomic.Int32
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		addr := rest
		if dials.Add(1) == 1 {
			addr = first
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}
