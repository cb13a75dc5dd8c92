package testenv

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/slowdisk"
)

// The wall clock of a server: images/clockshift/clockshift.c, an
// LD_PRELOAD library compiled here with the machine's gcc and copied into
// the container, moves the clock of every process in it as a file in the
// container says (libfaketime cannot run Redis: its jemalloc reads the
// clock while libfaketime starts). Go servers (etcd) read the clock without
// libc and cannot be moved this way, nor can the test process's own clock.

//go:embed images/clockshift/clockshift.c
var clockShiftC []byte

const (
	clockShiftSO   = "/opt/locker/clockshift.so"
	clockShiftFile = "/opt/locker/clock"
)

var (
	clockShiftOnce  sync.Once
	clockShiftBuilt []byte
	clockShiftErr   error
)

// clockShiftLib returns the compiled library, building it on first use.
func clockShiftLib() ([]byte, error) {
	clockShiftOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			clockShiftErr = fmt.Errorf("a server clock needs gcc to build its LD_PRELOAD library: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "locker-clockshift-")
		if err != nil {
			clockShiftErr = err
			return
		}
		defer os.RemoveAll(dir)
		src, so := filepath.Join(dir, "clockshift.c"), filepath.Join(dir, "clockshift.so")
		if err := os.WriteFile(src, clockShiftC, 0o644); err != nil {
			clockShiftErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", so, src).CombinedOutput(); err != nil {
			clockShiftErr = fmt.Errorf("building the clock library: %v: %s", err, out)
			return
		}
		clockShiftBuilt, clockShiftErr = os.ReadFile(so)
	})
	return clockShiftBuilt, clockShiftErr
}

// A Clock is the wall clock of a server started with one (RedisWithClock,
// ZooKeeperWithClock, PostgresWithClock): the test steps it and sets its
// rate while the server runs. It starts as the host's.
type Clock struct {
	s       *Server
	mu      sync.Mutex
	offset  time.Duration
	ratePPM int64
	system  time.Time // the host's clock when the rate was set
}

// Offset returns how far the server's clock is ahead of the host's now
// (negative: behind).
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offsetAt(time.Now())
}

func (c *Clock) offsetAt(now time.Time) time.Duration {
	off := c.offset
	if c.ratePPM != 0 {
		off += time.Duration(int64(now.Sub(c.system)) / 1_000_000 * c.ratePPM)
	}
	return off
}

// Jump steps the server's clock by d (back, if d is negative), at once.
func (c *Clock) Jump(t testing.TB, d time.Duration) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(t, c.offset+d, c.ratePPM, c.system)
}

// SetRate makes the server's clock run ppm parts per million fast (slow, if
// negative) from now on, keeping the offset it has reached.
func (c *Clock) SetRate(t testing.TB, ppm int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.set(t, c.offsetAt(now), ppm, now)
}

// Reset gives the server the host's clock again.
func (c *Clock) Reset(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(t, 0, 0, c.system)
}

// set rewrites the clock file in place (never truncated, so a reader never
// finds it empty; the library reads it until two reads agree), and only
// then takes the new setting: a write that failed changes nothing, so a
// retried Jump steps the clock once. The caller holds c.mu.
func (c *Clock) set(t testing.TB, offset time.Duration, ppm int64, system time.Time) {
	t.Helper()
	base := int64(0)
	if ppm != 0 {
		base = system.UnixNano()
	}
	line := clockLine(offset, ppm, base)
	c.s.Exec(t, "sh", "-c", fmt.Sprintf("printf '%%s' '%s' 1<> %s", line, clockShiftFile))
	c.offset, c.ratePPM, c.system = offset, ppm, system
}

// clockLine is the file's content: fixed-width, so each rewrite covers the
// last one.
func clockLine(offset time.Duration, ppm, base int64) string {
	return fmt.Sprintf("%020d %020d %020d\n", int64(offset), ppm, base)
}

// withClock starts sp's processes under the clock library.
func withClock(t testing.TB, sp *launch.Spec) {
	t.Helper()
	so, err := clockShiftLib()
	if err != nil {
		unavailable(t, "%v", err)
	}
	if sp.Files == nil {
		sp.Files = map[string]launch.File{}
	}
	sp.Files[clockShiftSO] = launch.File{Data: so, Mode: 0o755}
	sp.Files[clockShiftFile] = launch.File{Data: []byte(clockLine(0, 0, 0))}
	sp.Env = append(sp.Env, "LD_PRELOAD="+clockShiftSO, "LOCKER_CLOCK_FILE="+clockShiftFile)
}

// privateWithClock starts the server mk makes, private to the test, under
// a Clock.
func privateWithClock(t testing.TB, kind, envVar string, mk func(img Images, port int) launch.Spec) (*Server, *Clock) {
	t.Helper()
	s := Private(t, kind, envVar, func(img Images, port int) launch.Spec {
		sp := mk(img, port)
		withClock(t, &sp)
		return sp
	})
	return s, &Clock{s: s}
}

// RedisWithClock starts a redis-server 7.0 private to the test, configured
// as the shared one (no persistence), whose wall clock the test moves.
func RedisWithClock(t testing.TB) (*Server, *Clock) {
	t.Helper()
	return privateWithClock(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img Images, port int) launch.Spec {
		return launch.Redis(img.Server, port)
	})
}

// ZooKeeperWithClock starts a standalone ZooKeeper 3.8 private to the test,
// configured as the shared one, whose wall clock the test moves.
func ZooKeeperWithClock(t testing.TB) (*Server, *Clock) {
	t.Helper()
	return privateWithClock(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
		return zkSpec(img, port, 1, "")
	})
}

// RedisMastersWithClocks is RedisMasters with a Clock for each master, in
// the order of the cluster's Nodes: Redlock's masters, skewed.
func RedisMastersWithClocks(t testing.TB, n int) (*Cluster, []*Clock) {
	t.Helper()
	// Built here, on the test's goroutine: the members start on others.
	if _, err := clockShiftLib(); err != nil {
		unavailable(t, "%v", err)
	}
	c := newCluster(t, "redis", n, false, func(img Images, i int, ports []int) launch.Spec {
		sp := launch.Redis(img.Server, ports[i])
		withClock(t, &sp)
		return sp
	})
	clocks := make([]*Clock, n)
	for i, s := range c.Nodes {
		clocks[i] = &Clock{s: s}
	}
	return c, clocks
}

// ZooKeeperOnSlowDiskWithClock is ZooKeeperOnSlowDisk and
// ZooKeeperWithClock at once: a server whose disk and wall clock the test
// controls.
func ZooKeeperOnSlowDiskWithClock(t testing.TB) (*Server, *slowdisk.Disk, *Clock) {
	t.Helper()
	d := mountSlowDisks(t, 1)[0]
	s, c := privateWithClock(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
		sp := zkSpec(img, port, 1, "")
		onDisk(&sp, d)
		return sp
	})
	return s, d, c
}

// PostgresWithClock starts a PostgreSQL 15 private to the test, configured
// as the shared one, whose wall clock the test moves.
func PostgresWithClock(t testing.TB) (*Server, *Clock) {
	t.Helper()
	return privateWithClock(t, "postgres", "LOCKER_TEST_POSTGRES_DSN", func(img Images, port int) launch.Spec {
		return launch.Postgres(img.Server, port, pgSettings...)
	})
}
