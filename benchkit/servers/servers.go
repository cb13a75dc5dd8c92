// Package servers starts, for a benchmark run, the four lock services locker
// supports — Redis (one server and, optionally, independent masters for
// Redlock), etcd, ZooKeeper and PostgreSQL — as Docker containers of the
// images scripts/test-images builds locally, published on 127.0.0.1 only,
// and removes them afterwards. It is the benchmarks' front end of package
// internal/launch, which starts the tests' servers too: the same specs,
// ports, readiness probes, labels and clean-up of leftovers.
//
// Redis, ZooKeeper and PostgreSQL run in one container of the server image
// (launch.Combine: one copy of the image instead of eight saves most of a
// minute on the vfs storage driver); etcd 3.6 runs in its own image.
//
// Like package benchkit it is not part of locker's API.
package servers

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testimages"
)

// Options says what to start.
type Options struct {
	// RedlockMasters is the number of independent Redis masters to start
	// for Redlock besides the single Redis server; 0 for none.
	RedlockMasters int
	// Log receives a line per step; nil for none.
	Log io.Writer
}

// Servers are running servers; Close removes them.
type Servers struct {
	Redis     string   // host:port
	Redlock   []string // host:port of each master
	Etcd      string   // host:port
	ZooKeeper string   // host:port
	Postgres  string   // postgres:// DSN, user postgres, trust authentication
	// Info lists each server's version and address.
	Info []benchkit.Server

	containers []*launch.Container
	log        io.Writer
}

// RedisURL is the redis:// URL of the Redis server.
func (s *Servers) RedisURL() string { return "redis://" + s.Redis }

// RedlockURL is the redlock:// URL of the masters; "" without masters.
func (s *Servers) RedlockURL() string {
	if len(s.Redlock) == 0 {
		return ""
	}
	return "redlock://" + strings.Join(s.Redlock, ",")
}

// EtcdURL is the etcd:// URL of the etcd server.
func (s *Servers) EtcdURL() string { return "etcd://" + s.Etcd }

// ZooKeeperURL is the zookeeper:// URL of the ZooKeeper server.
func (s *Servers) ZooKeeperURL() string { return "zookeeper://" + s.ZooKeeper }

// PostgresURL is the postgres:// URL of the PostgreSQL server, with a
// connection budget (and pool) of 160 connections: enough for the largest
// handoff (128 waiters, each pinning a connection).
func (s *Servers) PostgresURL() string { return s.Postgres + "&pool_max_conns=160&max_conns=160" }

// URLs lists every locker URL: Redis, Redlock (when started), etcd,
// ZooKeeper, PostgreSQL.
func (s *Servers) URLs() []string {
	urls := []string{s.RedisURL()}
	if u := s.RedlockURL(); u != "" {
		urls = append(urls, u)
	}
	return append(urls, s.EtcdURL(), s.ZooKeeperURL(), s.PostgresURL())
}

func (s *Servers) logf(format string, args ...any) {
	if s.log != nil {
		fmt.Fprintf(s.log, "servers: "+format+"\n", args...)
	}
}

// pgSettings leave PostgreSQL's fsync on (a benchmark measures durable
// commits) and allow the peers' runs their connections besides ours.
var pgSettings = []string{"max_connections=400"}

// Start starts the servers and waits until each answers; on error it
// removes what it started.
func Start(ctx context.Context, o Options) (_ *Servers, err error) {
	s := &Servers{log: o.Log}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	d, err := launch.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("servers: no Docker engine (%v); start the servers yourself and pass their URLs with --backend", err)
	}
	serverImage, etcdImage, err := testimages.Ensure(ctx, s.logf)
	if err != nil {
		return nil, err
	}
	ports, err := launch.FreePorts(4 + o.RedlockMasters)
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	redis := []launch.Spec{launch.Redis(serverImage, ports[0])}
	for _, p := range ports[4:] {
		redis = append(redis, launch.Redis(serverImage, p))
	}
	specs := []launch.Spec{
		launch.Combine("servers", append(redis,
			launch.ZooKeeper(serverImage, ports[2], launch.ZooKeeperOptions{}),
			launch.Postgres(serverImage, ports[3], pgSettings...))...),
		launch.EtcdSingle(etcdImage, nil, ports[1]),
	}
	start := time.Now()
	for _, sp := range specs {
		c, err := d.Run(ctx, sp)
		if err != nil {
			return nil, fmt.Errorf("servers: %w", err)
		}
		s.containers = append(s.containers, c)
		s.logf("started %s (%s)", sp.Kind, sp.Image)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	version := map[string]string{} // by address
	for _, c := range s.containers {
		versions, err := c.Ready(ctx)
		if err != nil {
			return nil, fmt.Errorf("servers: %w", err)
		}
		for i, svc := range c.Spec.Services {
			version[svc.Addr()] = versions[i]
		}
	}
	at := func(p int) string { return launch.Service{Port: p}.Addr() }
	s.Redis, s.Etcd, s.ZooKeeper = at(ports[0]), at(ports[1]), at(ports[2])
	s.Postgres = launch.PostgresDSN(at(ports[3]))
	info := func(name, addr string) {
		s.Info = append(s.Info, benchkit.Server{Name: name, Version: version[addr], Address: addr})
	}
	info("Redis", s.Redis)
	for i, p := range ports[4:] {
		s.Redlock = append(s.Redlock, at(p))
		info(fmt.Sprintf("Redis (Redlock master %d)", i+1), at(p))
	}
	info("etcd", s.Etcd)
	info("ZooKeeper", s.ZooKeeper)
	info("PostgreSQL", at(ports[3]))
	s.logf("up in %v", time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

// Close removes the containers.
func (s *Servers) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, c := range s.containers {
		if err := c.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(s.containers) > 0 {
		s.logf("removed %d containers", len(s.containers))
	}
	s.containers = nil
	if len(errs) > 0 {
		return fmt.Errorf("servers: remove: %v", errs)
	}
	return nil
}
