package testenv

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
)

// SentinelDownAfter is the sentinel's down-after-milliseconds in a
// RedisSentinel deployment: a master silent this long is failed over (its
// failover timeout is five times it).
const SentinelDownAfter = time.Second

// A Sentinel is a Redis Sentinel deployment private to the calling test: a
// master, one replica and one sentinel (quorum 1), redis-server 7.0
// without persistence, in one container (see launch.RedisSentinel), removed
// at t.Cleanup. Every server is published on 127.0.0.1 under the port it
// listens on, which is also the address the sentinel reports, so a
// go-redis FailoverClient on the test machine follows a failover.
type Sentinel struct {
	srv   *Server // the container; its Addr is the first master's
	ports launch.SentinelPorts
	auth  launch.SentinelAuth
}

// RedisSentinel starts a Sentinel deployment with auth (the zero value: no
// passwords anywhere).
func RedisSentinel(t testing.TB, auth launch.SentinelAuth) *Sentinel {
	t.Helper()
	if _, err := docker(); err != nil {
		unavailable(t, "a Redis Sentinel deployment needs Docker (the LOCKER_TEST_* variables name single servers only): %v", err)
	}
	s := &Sentinel{auth: auth}
	s.srv = Private(t, "redis-sentinel", "LOCKER_TEST_REDIS_ADDR", func(img Images, port int) launch.Spec {
		more, err := launch.FreePorts(2)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		s.ports = launch.SentinelPorts{Master: port, Replica: more[0], Sentinel: more[1]}
		return launch.RedisSentinel(img.Server, s.ports, int(SentinelDownAfter/time.Millisecond), auth)
	})
	return s
}

// Addr is the sentinel's address, the host of a redis:// URL with
// master_name=MasterName().
func (s *Sentinel) Addr() string { return loopback(s.ports.Sentinel) }

// MasterName is the name the sentinel monitors the master under.
func (s *Sentinel) MasterName() string { return launch.SentinelMaster }

// Nodes are the data nodes' addresses: the first master's, then the
// replica's.
func (s *Sentinel) Nodes() []string {
	return []string{loopback(s.ports.Master), loopback(s.ports.Replica)}
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Master returns the master's address as the sentinel reports it now.
func (s *Sentinel) Master(t testing.TB) string {
	t.Helper()
	var m string
	err := poll(30*time.Second, func(ctx context.Context) (err error) {
		m, err = s.master(ctx)
		return err
	})
	if err != nil {
		t.Fatalf("testenv: sentinel: %v", err)
	}
	return m
}

// master reads the master's address from INFO sentinel
// ("master0:name=…,status=ok,address=127.0.0.1:port,…").
func (s *Sentinel) master(ctx context.Context) (string, error) {
	info, err := launch.SentinelInfo(ctx, s.Addr(), s.auth.Sentinel, "sentinel")
	if err != nil {
		return "", err
	}
	for _, f := range strings.Split(info, ",") {
		if a, ok := strings.CutPrefix(f, "address="); ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("no master address in %q", info)
}

// WaitFailover waits, up to within, until the sentinel reports a master
// other than old and that node says it is a master, and returns its
// address.
func (s *Sentinel) WaitFailover(t testing.TB, old string, within time.Duration) string {
	t.Helper()
	var m string
	err := poll(within, func(ctx context.Context) (err error) {
		if m, err = s.master(ctx); err != nil {
			return err
		}
		if m == old {
			return fmt.Errorf("the sentinel still reports %s as the master", old)
		}
		return s.hasRole(ctx, m, "role:master")
	})
	if err != nil {
		t.Fatalf("testenv: no failover from %s within %v: %v", old, within, err)
	}
	return m
}

// WaitReplica waits, up to within, until the data node at addr says it is
// a replica (as the sentinel makes a former master that comes back).
func (s *Sentinel) WaitReplica(t testing.TB, addr string, within time.Duration) {
	t.Helper()
	if err := poll(within, func(ctx context.Context) error { return s.hasRole(ctx, addr, "role:slave") }); err != nil {
		t.Fatalf("testenv: %s did not become a replica within %v: %v", addr, within, err)
	}
}

func (s *Sentinel) hasRole(ctx context.Context, addr, role string) error {
	info, err := launch.SentinelInfo(ctx, addr, s.auth.Data, "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(info, role+"\r\n") {
		return fmt.Errorf("%s is not %s: %q", addr, role, info)
	}
	return nil
}

// Pause freezes the data node at addr with SIGSTOP (what docker pause's
// freezer does to each process of a container; the sentinel shares the
// container, so the signal goes to the one process). Its connections stay
// open and its requests go unanswered.
func (s *Sentinel) Pause(t testing.TB, addr string) { t.Helper(); s.signal(t, addr, "STOP") }

// Unpause lets a node frozen by Pause run on.
func (s *Sentinel) Unpause(t testing.TB, addr string) { t.Helper(); s.signal(t, addr, "CONT") }

// Kill SIGKILLs the data node at addr (it does not come back).
func (s *Sentinel) Kill(t testing.TB, addr string) { t.Helper(); s.signal(t, addr, "KILL") }

func (s *Sentinel) signal(t testing.TB, addr, sig string) {
	t.Helper()
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	if port != s.ports.Master && port != s.ports.Replica {
		t.Fatalf("testenv: %s is not a data node of the Sentinel deployment (%v)", addr, s.Nodes())
	}
	s.srv.Exec(t, "sh", "-c", "kill -"+sig+" $(cat "+launch.SentinelPidFile(port)+")")
}
