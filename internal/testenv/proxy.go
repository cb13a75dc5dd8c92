package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/distlock/locker/internal/launch"
	"github.com/rs/zerolog"
)

// A Proxy is a toxiproxy in the test process, between the test's clients
// and one server, to break the client↔server path without touching the
// server: clients dial Proxy.Addr instead of Server.Addr.
type Proxy struct {
	p    *toxiproxy.Proxy
	addr string // p.Listen once started, which Retarget keeps
}

var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
	toxiSeq    atomic.Int64
)

// Proxy starts a proxy on 127.0.0.1 in front of s (of its address now: a
// proxy made before Restart still fits, since restarted servers keep their
// address), removed at t.Cleanup. It works for external servers too.
//
// Its port is one of launch.FreePort's, below the kernel's ephemeral range:
// Retarget closes the listener and opens it again, and an outgoing
// connection could take an ephemeral port in between (a CI run's Retarget
// failed with "bind: address already in use" on port 42447). A port another
// process bound since FreePort saw it free is given up for the next.
func (s *Server) Proxy(t testing.TB) *Proxy {
	t.Helper()
	var err error
	for range 10 {
		var port int
		if port, err = launch.FreePort(); err != nil {
			break
		}
		var p *Proxy
		if p, err = startProxy(t, s.kind, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), s.Addr()); err == nil {
			return p
		}
	}
	t.Fatalf("testenv: proxy for %s: %v", s.kind, err)
	return nil
}

// newProxy starts a proxy from listen to upstream, removed at t.Cleanup.
func newProxy(t testing.TB, kind, listen, upstream string) *Proxy {
	t.Helper()
	p, err := startProxy(t, kind, listen, upstream)
	if err != nil {
		t.Fatalf("testenv: proxy for %s: %v", kind, err)
	}
	return p
}

func startProxy(t testing.TB, kind, listen, upstream string) (*Proxy, error) {
	toxiOnce.Do(func() {
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	name := fmt.Sprintf("%s-%d", kind, toxiSeq.Add(1))
	p := toxiproxy.NewProxy(toxiServer, name, listen, upstream)
	if err := p.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p, addr: p.Listen}, nil
}

// Addr returns the address clients dial to go through the proxy.
func (p *Proxy) Addr() string { return p.addr }

// Retarget points the proxy at upstream instead, for a server replaced at
// a new address: the proxy stops, closing every connection through it,
// and starts again on the same address (clients reconnect to it), its
// toxics kept. Retarget to the current upstream does nothing.
func (p *Proxy) Retarget(t testing.TB, upstream string) {
	t.Helper()
	if err := p.p.Update(&toxiproxy.Proxy{Listen: p.addr, Upstream: upstream, Enabled: true}); err != nil {
		t.Fatalf("testenv: retarget the proxy %s to %s: %v", p.addr, upstream, err)
	}
}

func (p *Proxy) add(t testing.TB, typ, stream string, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, typ+"_"+stream, typ, stream, attrs)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("testenv: toxic %s %s: %v", typ, stream, err)
	}
}

// Blackhole stops traffic in both directions while keeping connections open
// (and accepting new ones): requests go unanswered, as behind a dead router.
// Bytes sent meanwhile are dropped, and Heal closes the connections that
// were blackholed (toxiproxy's timeout toxic), so clients reconnect. To
// hold bytes back and deliver them later, use a long Latency and Heal.
func (p *Proxy) Blackhole(t testing.TB) {
	t.Helper()
	p.add(t, "timeout", "upstream", `{"timeout":0}`)
	p.add(t, "timeout", "downstream", `{"timeout":0}`)
}

// DropReplies drops every byte from the server while the client's requests
// still reach it, until Heal (which closes the connections, as Blackhole's
// does): the server runs each request, the client hears nothing — a
// one-way partition.
func (p *Proxy) DropReplies(t testing.TB) {
	t.Helper()
	p.add(t, "timeout", "downstream", `{"timeout":0}`)
}

// DropRequests drops every byte from the client while the server's
// answers to what it had already sent still come, until Heal: the other
// one-way partition.
func (p *Proxy) DropRequests(t testing.TB) {
	t.Helper()
	p.add(t, "timeout", "upstream", `{"timeout":0}`)
}

// ResetPeer resets (TCP RST) every connection, open or new, as soon as the
// client sends on it, until Heal.
func (p *Proxy) ResetPeer(t testing.TB) {
	t.Helper()
	p.add(t, "reset_peer", "upstream", `{"timeout":0}`)
}

// Latency delays every answer from the server by d (so each round trip
// grows by d), until Heal, which lets answers still held through at once
// (none is lost). toxiproxy counts in whole milliseconds.
func (p *Proxy) Latency(t testing.TB, d time.Duration) {
	t.Helper()
	p.add(t, "latency", "downstream", fmt.Sprintf(`{"latency":%d,"jitter":0}`, d.Milliseconds()))
}

// ResetReplies resets (TCP RST) every connection, open or new, as soon as
// the server answers on it, until Heal: the server got and ran the request,
// the client never sees the answer.
func (p *Proxy) ResetReplies(t testing.TB) {
	t.Helper()
	p.add(t, "reset_peer", "downstream", `{"timeout":0}`)
}

// DelayRequests delays every request on its way to the server by d, until
// Heal: a request sent meanwhile reaches the server d later, even if its
// client has given up and closed the connection.
func (p *Proxy) DelayRequests(t testing.TB, d time.Duration) {
	t.Helper()
	p.add(t, "latency", "upstream", fmt.Sprintf(`{"latency":%d,"jitter":0}`, d.Milliseconds()))
}

// Heal removes every toxic: traffic flows again on the open connections.
func (p *Proxy) Heal(t testing.TB) {
	t.Helper()
	p.p.Toxics.ResetToxics(context.Background())
}
