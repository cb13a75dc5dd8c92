package testenv

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
)

// A Server is one running server reachable from the test process on
// 127.0.0.1 — or, when an environment variable names it, a server someone
// else runs, on which only Addr, DSN and Proxy work.
type Server struct {
	kind   string // "redis", "etcd", …: for messages
	envVar string // the variable that could name an external server instead
	addr   string
	dsn    string // postgres only

	// Containers only.
	c   *launch.Container
	svc launch.Service
}

// newServer describes the server of a container started from one of
// launch's single-server specs.
func newServer(c *launch.Container) *Server {
	svc := c.Spec.Services[0]
	s := &Server{kind: c.Spec.Kind, c: c, svc: svc, addr: svc.Addr()}
	if svc.Kind == "postgres" {
		s.dsn = launch.PostgresDSN(s.addr)
	}
	return s
}

// Addr returns "127.0.0.1:port" (for an external server, what its variable
// says). It stays the same across Kill and Restart.
func (s *Server) Addr() string { return s.addr }

// DSN returns the libpq URL of a PostgreSQL server:
// postgres://postgres@127.0.0.1:port/postgres?sslmode=disable.
func (s *Server) DSN() string {
	if s.kind != "postgres" {
		panic("testenv: DSN of a " + s.kind + " server")
	}
	return s.dsn
}

// container returns the container, or skips/fails t for an external server.
func (s *Server) container(t testing.TB, what string) *launch.Container {
	t.Helper()
	if s.c == nil {
		unavailable(t, "%s needs a container, but %s names an external %s server; unset it to run this test", what, s.envVar, s.kind)
	}
	return s.c
}

// opContext bounds each fault operation, so a stuck engine fails the test
// instead of hanging it.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// do runs one fault operation on the container, failing t if it fails.
func (s *Server) do(t testing.TB, what string, op func(*launch.Container, context.Context) error) {
	t.Helper()
	c := s.container(t, what)
	ctx, cancel := opContext()
	defer cancel()
	if err := op(c, ctx); err != nil {
		t.Fatalf("testenv: %s %s: %v", what, s.kind, err)
	}
}

// Pause freezes every process of the server (docker pause, the cgroup
// freezer: like SIGSTOP, unnoticeable to the process). Connections stay open
// and requests go unanswered.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.do(t, "Pause", (*launch.Container).Pause)
}

// Unpause lets a paused server run on from where it stopped.
func (s *Server) Unpause(t testing.TB) {
	t.Helper()
	s.do(t, "Unpause", (*launch.Container).Unpause)
}

// Kill SIGKILLs the server: it gets no chance to flush or say goodbye, its
// clients see connections refused. It returns once the container has stopped.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.do(t, "Kill", (*launch.Container).Kill)
}

// Restart starts a killed server again and waits until it answers. The
// container keeps its filesystem, so servers that persist (PostgreSQL, etcd,
// ZooKeeper) come back with their data; Redis runs without persistence and
// comes back empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	start := time.Now()
	s.do(t, "Restart", func(c *launch.Container, ctx context.Context) error {
		if err := c.Start(ctx); err != nil {
			return err
		}
		_, err := c.Ready(ctx)
		return err
	})
	t.Logf("testenv: %s restarted in %v", s.kind, time.Since(start).Round(time.Millisecond))
}

// Disconnect cuts a cluster member off its cluster network: it can no longer
// reach its peers nor they it, while the test process still reaches it
// through its published port (a partition between servers, not between
// client and server; for that, see Proxy).
func (s *Server) Disconnect(t testing.TB) {
	t.Helper()
	s.do(t, "Disconnect", func(c *launch.Container, ctx context.Context) error {
		if c.Spec.Network == nil {
			t.Fatalf("testenv: Disconnect of a %s server that is not a cluster member", s.kind)
		}
		return c.Disconnect(ctx, c.Spec.Network)
	})
}

// NetworkAddr returns a cluster member's address on its cluster's network.
func (s *Server) NetworkAddr(t testing.TB) netip.Addr {
	t.Helper()
	var ip netip.Addr
	s.do(t, "NetworkAddr", func(c *launch.Container, ctx context.Context) error {
		if c.Spec.Network == nil {
			t.Fatalf("testenv: NetworkAddr of a %s server that is not a cluster member", s.kind)
		}
		var err error
		ip, _, err = c.Endpoint(ctx, c.Spec.Network.Name)
		return err
	})
	return ip
}

// Reconnect undoes Disconnect, under the same name and address on the
// network.
func (s *Server) Reconnect(t testing.TB) {
	t.Helper()
	s.do(t, "Reconnect", func(c *launch.Container, ctx context.Context) error {
		if c.Spec.Network == nil {
			t.Fatalf("testenv: Reconnect of a %s server that is not a cluster member", s.kind)
		}
		return c.Connect(ctx, c.Spec.Network)
	})
}

// startServer runs sp and, unless noWait, waits until it answers. On error
// the container, if one was made, is already removed.
func startServer(ctx context.Context, d *launch.Docker, sp launch.Spec, noWait bool) (*Server, error) {
	c, err := d.Run(ctx, sp)
	if err != nil {
		return nil, err
	}
	if !noWait {
		if _, err := c.Ready(ctx); err != nil {
			c.Remove(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return newServer(c), nil
}

// remove removes the container, whatever its state.
func (s *Server) remove() {
	if s.c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.c.Remove(ctx)
}

// Exec runs cmd in the server's container and returns its output; a
// command that cannot run or exits non-zero fails t.
func (s *Server) Exec(t testing.TB, cmd ...string) string {
	t.Helper()
	c := s.container(t, "Exec")
	ctx, cancel := opContext()
	defer cancel()
	code, out, err := c.Exec(ctx, cmd...)
	if err != nil || code != 0 {
		t.Fatalf("testenv: exec %q in %s: exit %d, %v: %s", cmd, s.kind, code, err, out)
	}
	return out
}
