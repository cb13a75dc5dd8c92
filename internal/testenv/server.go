package testenv

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// A Server is one running server reachable from the test process on
// 127.0.0.1 — or, when an environment variable names it, a server someone
// else runs, on which only Addr, DSN and Proxy work.
type Server struct {
	kind   string // "redis", "etcd", …: for messages and probes
	envVar string // the variable that could name an external server instead

	// Containers only.
	c     *testcontainers.DockerContainer
	cli   *testcontainers.DockerClient
	port  int // in the container, and published under the same number
	net   *testcontainers.DockerNetwork
	alias string // name on net
	probe func(ctx context.Context, s *Server) error

	mu   sync.Mutex
	addr string
	dsn  string // postgres only
}

// Addr returns "127.0.0.1:port" (for an external server, what its variable
// says). It is read again from Docker after Restart.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// DSN returns the libpq URL of a PostgreSQL server:
// postgres://postgres@127.0.0.1:port/postgres?sslmode=disable.
func (s *Server) DSN() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind != "postgres" {
		panic("testenv: DSN of a " + s.kind + " server")
	}
	return s.dsn
}

// container returns the container, or skips/fails t for an external server.
func (s *Server) container(t testing.TB, what string) *testcontainers.DockerContainer {
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

// Pause freezes every process of the server (docker pause, the cgroup
// freezer: like SIGSTOP, unnoticeable to the process). Connections stay open
// and requests go unanswered.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	c := s.container(t, "Pause")
	ctx, cancel := opContext()
	defer cancel()
	// The cgroup freezer gives up when a task will not stop in time
	// ("unable to freeze"), which happens on a loaded machine; it says
	// nothing about the server, so try again a few times.
	var err error
	for attempt := range pauseAttempts {
		if _, err = s.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{}); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatalf("testenv: pause %s: %v", s.kind, err)
	}
}

// pauseAttempts bounds the tries of one Pause.
const pauseAttempts = 4

// Unpause lets a paused server run on from where it stopped.
func (s *Server) Unpause(t testing.TB) {
	t.Helper()
	c := s.container(t, "Unpause")
	ctx, cancel := opContext()
	defer cancel()
	if _, err := s.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatalf("testenv: unpause %s: %v", s.kind, err)
	}
}

// Kill SIGKILLs the server: it gets no chance to flush or say goodbye, its
// clients see connections refused. It returns once the container has stopped.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	c := s.container(t, "Kill")
	ctx, cancel := opContext()
	defer cancel()
	// A frozen process cannot die; a paused server must be killable too.
	s.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	if _, err := s.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("testenv: kill %s: %v", s.kind, err)
	}
	for {
		r, err := s.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("testenv: kill %s: %v", s.kind, err)
		}
		if r.Container.State == nil || !r.Container.State.Running {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: kill %s: still running", s.kind)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Restart starts a killed server again and waits until it answers. The
// container keeps its filesystem, so servers that persist (PostgreSQL, etcd,
// ZooKeeper) come back with their data; Redis runs without persistence and
// comes back empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	c := s.container(t, "Restart")
	ctx, cancel := opContext()
	defer cancel()
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("testenv: restart %s: %v", s.kind, err)
	}
	if err := s.ready(ctx); err != nil {
		t.Fatalf("testenv: restart %s: %v", s.kind, err)
	}
	t.Logf("testenv: %s restarted in %v", s.kind, time.Since(start).Round(time.Millisecond))
}

// Disconnect cuts a cluster member off its cluster network: it can no longer
// reach its peers nor they it, while the test process still reaches it
// through its published port (a partition between servers, not between
// client and server; for that, see Proxy).
func (s *Server) Disconnect(t testing.TB) {
	t.Helper()
	c := s.container(t, "Disconnect")
	if s.net == nil {
		t.Fatalf("testenv: Disconnect of a %s server that is not a cluster member", s.kind)
	}
	ctx, cancel := opContext()
	defer cancel()
	if _, err := s.cli.NetworkDisconnect(ctx, s.net.ID, client.NetworkDisconnectOptions{Container: c.ID, Force: true}); err != nil {
		t.Fatalf("testenv: disconnect %s: %v", s.alias, err)
	}
}

// Reconnect undoes Disconnect, under the same name on the network.
func (s *Server) Reconnect(t testing.TB) {
	t.Helper()
	c := s.container(t, "Reconnect")
	if s.net == nil {
		t.Fatalf("testenv: Reconnect of a %s server that is not a cluster member", s.kind)
	}
	ctx, cancel := opContext()
	defer cancel()
	_, err := s.cli.NetworkConnect(ctx, s.net.ID, client.NetworkConnectOptions{
		Container:      c.ID,
		EndpointConfig: &network.EndpointSettings{Aliases: []string{s.alias}},
	})
	if err != nil {
		t.Fatalf("testenv: reconnect %s: %v", s.alias, err)
	}
}

// ready waits until the server answers its probe, re-reading the published
// port first.
func (s *Server) ready(ctx context.Context) error {
	p, err := s.c.MappedPort(ctx, portSpec(s.port))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Num())))
	if s.kind == "postgres" {
		s.dsn = "postgres://postgres@" + s.addr + "/postgres?sslmode=disable"
	}
	s.mu.Unlock()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = s.probe(pctx, s)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering (%v); last log lines:\n%s", err, s.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail returns the end of the container's log, for error messages.
func (s *Server) logTail() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := s.c.Logs(ctx)
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(tail(b, 2000))
}

// spec says how to run one server.
type spec struct {
	kind       string
	image      string
	entrypoint []string
	cmd        []string
	port       int
	net        *testcontainers.DockerNetwork
	alias      string
	probe      func(ctx context.Context, s *Server) error
	// extraHosts are /etc/hosts lines ("name:ip", ip may be host-gateway).
	extraHosts []string
	// noWait skips the readiness probe: cluster members answer only once a
	// quorum has formed, which the caller waits for.
	noWait bool
}

func portSpec(p int) string { return strconv.Itoa(p) + "/tcp" }

// startServer creates and starts a container. On error the container, if
// one was made, is already removed.
func startServer(ctx context.Context, cli *testcontainers.DockerClient, sp spec) (*Server, error) {
	startWatchdog()
	port := portSpec(sp.port)
	req := testcontainers.ContainerRequest{
		Name:         fmt.Sprintf("locker-test-%s-%s", sp.kind, randomID(4)),
		Image:        sp.image,
		Entrypoint:   sp.entrypoint,
		Cmd:          sp.cmd,
		ExposedPorts: []string{port},
		Labels:       labels(),
		HostConfigModifier: func(hc *container.HostConfig) {
			// Published on loopback only, under the number the server
			// listens on (see the package doc, Addresses).
			hc.PortBindings = network.PortMap{network.MustParsePort(port): {{
				HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(sp.port),
			}}}
			hc.ExtraHosts = sp.extraHosts
		},
	}
	if sp.net != nil {
		// The default bridge carries the published port, the cluster
		// network the peer traffic: Disconnect cuts only the latter.
		req.Networks = []string{"bridge", sp.net.Name}
		req.NetworkAliases = map[string][]string{sp.net.Name: {sp.alias}}
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		if c != nil {
			removeContainer(context.Background(), cli, c.GetContainerID())
		}
		return nil, fmt.Errorf("start %s container: %w", sp.kind, err)
	}
	s := &Server{kind: sp.kind, c: c.(*testcontainers.DockerContainer), cli: cli, port: sp.port, net: sp.net, alias: sp.alias, probe: sp.probe}
	if sp.noWait {
		return s, s.readAddr(ctx)
	}
	if err := s.ready(ctx); err != nil {
		s.remove()
		return nil, fmt.Errorf("%s: %w", sp.kind, err)
	}
	return s, nil
}

// readAddr sets the address without waiting for the server.
func (s *Server) readAddr(ctx context.Context) error {
	probe := s.probe
	s.probe = func(context.Context, *Server) error { return nil }
	err := s.ready(ctx)
	s.probe = probe
	return err
}

// remove removes the container, whatever its state.
func (s *Server) remove() {
	if s.c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removeContainer(ctx, s.cli, s.c.ID)
}

// Host ports are chosen by testenv, not Docker, so that servers can be told
// their published address before they start. They come from below the
// kernel's ephemeral range (32768 and up on Linux), where outgoing
// connections take their local ports and could steal a killed server's port
// before it restarts.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freePort returns a port free on 127.0.0.1 and not handed out before by
// this process. A port free now may be taken by another process before the
// container binds it; the odds are small and the failure loud.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if ports[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in 20000-32000")
}
