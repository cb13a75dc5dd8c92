package floor

import (
	"context"
	"sync"

	"github.com/distlock/locker/benchkit"
	goredis "github.com/redis/go-redis/v9"
)

// Redis is the floor of one Redis server at url (redis://host:port/db):
// PING, then PING.
func Redis(ctx context.Context, url string) (*benchkit.Subject, error) {
	o, err := goredis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.PoolSize = max(o.PoolSize, 128)
	c := goredis.NewClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &benchkit.Subject{Name: "floor 2×PING", Group: "redis", Role: benchkit.RoleFloor,
		Floor: "2 × PING (acquire and release are one EVALSHA each)", Mutex: redisPing{c}, Close: c.Close}, nil
}

type redisPing struct{ c *goredis.Client }

func (p redisPing) Lock(ctx context.Context, _ string) (benchkit.Release, error) {
	if err := p.c.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return p.c.Ping(ctx).Err() }, nil
}

// Redlock is the floor of Redlock over the masters at urls: a PING to every
// master in parallel, waiting for all of them, twice.
func Redlock(ctx context.Context, urls []string) (*benchkit.Subject, error) {
	var cs []*goredis.Client
	var cl closers
	for _, u := range urls {
		o, err := goredis.ParseURL(u)
		if err != nil {
			_ = cl.Close()
			return nil, err
		}
		o.PoolSize = max(o.PoolSize, 128)
		c := goredis.NewClient(o)
		cs, cl = append(cs, c), append(cl, c.Close)
	}
	m := redlockPing(cs)
	if err := m.all(ctx); err != nil {
		_ = cl.Close()
		return nil, err
	}
	return &benchkit.Subject{Name: "floor 2×PING all masters", Group: "redlock", Role: benchkit.RoleFloor,
		Floor: "2 × (PING every master in parallel, wait for all)", Mutex: m, Close: cl.Close}, nil
}

type redlockPing []*goredis.Client

func (p redlockPing) all(ctx context.Context) error {
	errs := make([]error, len(p))
	var wg sync.WaitGroup
	for i, c := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Ping(ctx).Err()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (p redlockPing) Lock(ctx context.Context, _ string) (benchkit.Release, error) {
	if err := p.all(ctx); err != nil {
		return nil, err
	}
	return p.all, nil
}
