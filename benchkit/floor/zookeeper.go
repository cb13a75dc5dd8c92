package floor

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/distlock/locker/benchkit"
	"github.com/go-zookeeper/zk"
)

// ZooKeeper is the floor of a ZooKeeper ensemble: create an ephemeral
// sequential node, list its parent's children, delete the node.
func ZooKeeper(ctx context.Context, servers []string) (*benchkit.Subject, error) {
	c, err := Dial(ctx, servers)
	if err != nil {
		return nil, err
	}
	m := &zkQueue{c: c, root: "/" + strings.TrimSuffix(benchkit.RandomPrefix("lockbench-floor"), "/")}
	return &benchkit.Subject{Name: "floor create+children+delete", Group: "zookeeper", Role: benchkit.RoleFloor,
		Floor: "create ephemeral-sequential + getChildren + delete", Mutex: m,
		Close: func() error { c.Close(); return nil }}, nil
}

// Dial connects to ZooKeeper and waits for a session, within ctx.
func Dial(ctx context.Context, servers []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(servers, 15*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

type zkQueue struct {
	c    *zk.Conn
	root string
}

func (m *zkQueue) Lock(_ context.Context, key string) (benchkit.Release, error) {
	dir := m.root + "/" + key
	p, err := m.c.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if err := MkdirAll(m.c, dir); err != nil {
			return nil, err
		}
		p, err = m.c.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	}
	if err != nil {
		return nil, err
	}
	if _, _, err := m.c.Children(dir); err != nil {
		return nil, err
	}
	return func(context.Context) error { return m.c.Delete(p, -1) }, nil
}

// MkdirAll creates dir and its parents as persistent nodes.
func MkdirAll(c *zk.Conn, dir string) error {
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}
