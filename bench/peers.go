package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncpool "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/distlock/locker/benchkit"
	"github.com/distlock/locker/benchkit/floor"
)

// The peer libraries, each used the way its documentation shows, with the
// settings a user needs for a blocking lock: a 15 s TTL like ours, and
// waits that last as long as the workload needs. Their own retry pacing is
// kept: how a library waits is part of what is compared.

// redisClient opens one go-redis client with a pool as large as the biggest
// workload's concurrency, as our Redis URL's client gets.
func redisClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 160})
}

// redsyncMutex is github.com/go-redsync/redsync/v4 over one or more
// masters: a Mutex per Lock (as its README does), expiry = TTL, tries
// raised from 32 so that 128 waiters do not give up (its default retry delay,
// 50–250 ms at random, is kept).
type redsyncMutex struct {
	rs  *redsync.Redsync
	ttl time.Duration
}

func newRedsync(group string, addrs []string, ttl time.Duration) *benchkit.Subject {
	var pools []redsyncpool.Pool
	var clients []*goredis.Client
	for _, a := range addrs {
		c := redisClient(a)
		clients = append(clients, c)
		pools = append(pools, redsyncgoredis.NewPool(c))
	}
	return &benchkit.Subject{Name: "redsync", Group: group, Role: benchkit.RolePeer,
		Mutex: redsyncMutex{rs: redsync.New(pools...), ttl: ttl}, Close: closeAll(clients)}
}

func (m redsyncMutex) Lock(ctx context.Context, key string) (benchkit.Release, error) {
	mu := m.rs.NewMutex("redsync/"+key, redsync.WithExpiry(m.ttl), redsync.WithTries(1<<20))
	if err := mu.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := mu.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock found the lock gone")
		}
		return err
	}, nil
}

// redislockMutex is github.com/bsm/redislock: Obtain with a retry strategy
// (the default is not to wait at all), LinearBackoff(10 ms) — shorter than
// the 100 ms of its README, so its handoffs are not slowed by our choice —
// and a deadline of 2 minutes instead of its default of one TTL.
type redislockMutex struct {
	c   *redislock.Client
	ttl time.Duration
}

func newRedislock(addr string, ttl time.Duration) *benchkit.Subject {
	c := redisClient(addr)
	return &benchkit.Subject{Name: "redislock", Group: "redis", Role: benchkit.RolePeer,
		Mutex: redislockMutex{c: redislock.New(c), ttl: ttl}, Close: c.Close}
}

func (m redislockMutex) Lock(ctx context.Context, key string) (benchkit.Release, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	l, err := m.c.Obtain(ctx, "redislock/"+key, m.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// etcdMutex is go.etcd.io/etcd/client/v3/concurrency.Mutex. A Session may
// hold a given key only once (two Mutexes of one session on one key both
// "hold" it), so concurrent Lock calls take sessions from a pool that grows
// to the workload's concurrency: one lease per session, as a program with
// that many goroutines would use.
type etcdMutex struct {
	cli  *clientv3.Client
	ttl  int
	mu   sync.Mutex
	free []*concurrency.Session
	all  []*concurrency.Session
}

func newEtcdMutex(endpoints []string, ttl time.Duration) (*benchkit.Subject, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	m := &etcdMutex{cli: cli, ttl: int(ttl.Round(time.Second) / time.Second)}
	return &benchkit.Subject{Name: "concurrency.Mutex", Group: "etcd", Role: benchkit.RolePeer, Mutex: m, Close: m.close}, nil
}

func (m *etcdMutex) session() (*concurrency.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.free); n > 0 {
		s := m.free[n-1]
		m.free = m.free[:n-1]
		return s, nil
	}
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(m.ttl))
	if err != nil {
		return nil, err
	}
	m.all = append(m.all, s)
	return s, nil
}

func (m *etcdMutex) put(s *concurrency.Session) {
	m.mu.Lock()
	m.free = append(m.free, s)
	m.mu.Unlock()
}

func (m *etcdMutex) Lock(ctx context.Context, key string) (benchkit.Release, error) {
	s, err := m.session()
	if err != nil {
		return nil, err
	}
	mu := concurrency.NewMutex(s, "/concurrency-mutex/"+key)
	if err := mu.Lock(ctx); err != nil {
		m.put(s)
		return nil, err
	}
	return func(ctx context.Context) error {
		defer m.put(s)
		return mu.Unlock(ctx)
	}, nil
}

func (m *etcdMutex) close() error {
	for _, s := range m.all {
		_ = s.Close()
	}
	return m.cli.Close()
}

// zkMutex is github.com/go-zookeeper/zk's Lock over one connection (one
// session), as our ZooKeeper Locker uses one: a zk.Lock per Lock call.
type zkMutex struct{ c *zk.Conn }

func newZkLock(ctx context.Context, servers []string) (*benchkit.Subject, error) {
	c, err := floor.Dial(ctx, servers)
	if err != nil {
		return nil, err
	}
	return &benchkit.Subject{Name: "zk.Lock", Group: "zookeeper", Role: benchkit.RolePeer,
		Mutex: zkMutex{c}, Close: func() error { c.Close(); return nil }}, nil
}

func (m zkMutex) Lock(_ context.Context, key string) (benchkit.Release, error) {
	l := zk.NewLock(m.c, "/zk-lock/"+strings.ReplaceAll(key, "//", "/"), zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

// advisoryMutex is PostgreSQL's session-level advisory lock through pgx:
// pg_advisory_lock(hashtextextended(key, 0)) on a connection pinned from a
// pool, pg_advisory_unlock on release.
type advisoryMutex struct{ pool *pgxpool.Pool }

func newAdvisory(ctx context.Context, dsn string) (*benchkit.Subject, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 160
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	return &benchkit.Subject{Name: "pg_advisory_lock", Group: "postgres", Role: benchkit.RolePeer,
		Mutex: advisoryMutex{pool}, Close: func() error { pool.Close(); return nil }}, nil
}

func (m advisoryMutex) Lock(ctx context.Context, key string) (benchkit.Release, error) {
	c, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
		c.Release()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer c.Release()
		_, err := c.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
		return err
	}, nil
}

func closeAll(cs []*goredis.Client) func() error {
	return func() error {
		var errs []error
		for _, c := range cs {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
}
