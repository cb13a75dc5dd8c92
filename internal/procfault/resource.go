package procfault

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/postgres"
	"github.com/distlock/locker/redis"
	"github.com/distlock/locker/zookeeper"
)

// A Resource is one value kept in a backend's store behind that backend's
// own fencing guard: Write admits the token and sets the value in one
// atomic step, or refuses a stale token (fencing.ErrStaleToken) and
// changes nothing.
type Resource interface {
	Write(ctx context.Context, token uint64, value string) error
	Read(ctx context.Context) (string, error)
	Close() error
}

// Kinds are the stores OpenResource knows, by the name it takes.
var Kinds = []string{"redis", "etcd", "zookeeper", "postgres"}

// ErrKind is returned by OpenResource for a kind not in Kinds.
var ErrKind = errors.New("procfault: unknown resource kind")

// OpenResource opens the resource name in the store of kind at addr
// (host:port; a DSN for postgres). The holder process and the test that
// drives it open the same resource, each with its own connection.
func OpenResource(ctx context.Context, kind, addr, name string) (Resource, error) {
	switch kind {
	case "redis":
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		g, err := redis.NewGuard(c, redis.WithGuardPrefix("procfault:"))
		if err != nil {
			c.Close()
			return nil, err
		}
		return &redisResource{c, g, name}, nil
	case "etcd":
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		g, err := etcd.NewGuard(c, etcd.WithGuardPrefix("procfault-fence/"))
		if err != nil {
			c.Close()
			return nil, err
		}
		return &etcdResource{c, g, "procfault-value/" + name}, nil
	case "zookeeper":
		c, _, err := zk.Connect([]string{addr}, 30*time.Second, zk.WithLogger(quiet{}))
		if err != nil {
			return nil, err
		}
		g, err := zookeeper.NewGuard(c, zookeeper.WithGuardRoot("/procfault-fences"))
		if err != nil {
			c.Close()
			return nil, err
		}
		r := &zkResource{c, g, name, "/procfault-value-" + name}
		if _, err := c.Create(r.path, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			c.Close()
			return nil, err
		}
		return r, nil
	case "postgres":
		p, err := pgxpool.New(ctx, addr)
		if err != nil {
			return nil, err
		}
		g, err := postgres.NewGuard(p)
		if err == nil {
			_, err = p.Exec(ctx, "CREATE TABLE IF NOT EXISTS procfault_values (resource text PRIMARY KEY, value text NOT NULL)")
		}
		if err != nil {
			p.Close()
			return nil, err
		}
		return &pgResource{p, g, name}, nil
	}
	return nil, fmt.Errorf("%w: %q (want one of %v)", ErrKind, kind, Kinds)
}

type redisResource struct {
	c    *goredis.Client
	g    *redis.Guard
	name string
}

func (r *redisResource) Write(ctx context.Context, token uint64, value string) error {
	return r.g.Write(ctx, r.name, token, value)
}

func (r *redisResource) Read(ctx context.Context) (string, error) {
	v, _, _, err := r.g.Get(ctx, r.name)
	return v, err
}

func (r *redisResource) Close() error { return r.c.Close() }

type etcdResource struct {
	c   *clientv3.Client
	g   *etcd.Guard
	key string
}

func (r *etcdResource) Write(ctx context.Context, token uint64, value string) error {
	_, err := r.g.Write(ctx, r.key, token, clientv3.OpPut(r.key, value))
	return err
}

func (r *etcdResource) Read(ctx context.Context) (string, error) {
	resp, err := r.c.Get(ctx, r.key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	return string(resp.Kvs[0].Value), nil
}

func (r *etcdResource) Close() error { return r.c.Close() }

type zkResource struct {
	c          *zk.Conn
	g          *zookeeper.Guard
	name, path string
}

func (r *zkResource) Write(ctx context.Context, token uint64, value string) error {
	_, err := r.g.Write(ctx, r.name, token, &zk.SetDataRequest{Path: r.path, Data: []byte(value), Version: -1})
	return err
}

func (r *zkResource) Read(context.Context) (string, error) {
	v, _, err := r.c.Get(r.path)
	return string(v), err
}

func (r *zkResource) Close() error { r.c.Close(); return nil }

type pgResource struct {
	p    *pgxpool.Pool
	g    *postgres.Guard
	name string
}

func (r *pgResource) Write(ctx context.Context, token uint64, value string) error {
	return r.g.Write(ctx, r.name, token, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO procfault_values VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET value = EXCLUDED.value", r.name, value)
		return err
	})
}

func (r *pgResource) Read(ctx context.Context) (string, error) {
	var v string
	err := r.p.QueryRow(ctx, "SELECT value FROM procfault_values WHERE resource = $1", r.name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, err
}

func (r *pgResource) Close() error { r.p.Close(); return nil }

// quiet drops go-zookeeper's log lines, which would mix with the holder's
// events.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
