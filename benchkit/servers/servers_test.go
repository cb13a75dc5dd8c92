package servers_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/benchkit/servers"
	"github.com/distlock/locker/internal/launch"
)

// ephemeralLow returns the first port of the kernel's ephemeral range, from
// which outgoing connections take their local ports.
func ephemeralLow(t *testing.T) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768 // Linux's default; elsewhere the bound is the launcher's
	}
	lo, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	return lo
}

// The servers of a benchmark run are published on ports chosen as the
// tests' are: below the ephemeral range, where no outgoing connection can
// take a server's port while it restarts.
func TestStart_PortsBelowEphemeralRange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := launch.Connect(ctx); err != nil && os.Getenv("CI") == "" {
		t.Skipf("no Docker engine (%v): the servers cannot start here", err)
	}
	s, err := servers.Start(ctx, servers.Options{RedlockMasters: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg, err := url.Parse(s.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	lo := ephemeralLow(t)
	for _, addr := range append([]string{s.Redis, s.Etcd, s.ZooKeeper, pg.Host}, s.Redlock...) {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(p); n >= lo {
			t.Errorf("%s: port in the ephemeral range (%d and up)", addr, lo)
		}
	}
	if len(s.Info) != 4+len(s.Redlock) {
		t.Errorf("Info lists %d servers, want %d: %v", len(s.Info), 4+len(s.Redlock), s.Info)
	}
	for _, i := range s.Info {
		if i.Version == "" || strings.Contains(i.Version, "unknown") {
			t.Errorf("%s at %s: version %q", i.Name, i.Address, i.Version)
		}
	}
}
