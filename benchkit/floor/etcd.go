package floor

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/distlock/locker/benchkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is the floor of an etcd cluster: a txn that puts the key on a lease
// if its CreateRevision is 0, then a delete of the key.
func Etcd(ctx context.Context, endpoints []string) (*benchkit.Subject, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: quietZap()})
	if err != nil {
		return nil, err
	}
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	ka, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		cancel()
		_ = cli.Close()
		return nil, err
	}
	go func() {
		for range ka {
		}
	}()
	m := &etcdTxn{cli: cli, lease: lease.ID, prefix: benchkit.RandomPrefix("/lockbench-floor")}
	return &benchkit.Subject{Name: "floor txn put+delete", Group: "etcd", Role: benchkit.RoleFloor,
		Floor: "txn put (leased, if CreateRevision = 0) + delete: two Raft writes", Mutex: m,
		Close: func() error {
			cancel()
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			_, _ = cli.Revoke(rctx, lease.ID)
			return cli.Close()
		}}, nil
}

type etcdTxn struct {
	seq    atomic.Int64
	cli    *clientv3.Client
	lease  clientv3.LeaseID
	prefix string
}

func (m *etcdTxn) Lock(ctx context.Context, key string) (benchkit.Release, error) {
	// A floor excludes nobody: workers of the many-keys workload may pick
	// the same key at once, so each put gets a name of its own.
	k := m.prefix + key + "/" + strconv.FormatInt(m.seq.Add(1), 10)
	resp, err := m.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, "", clientv3.WithLease(m.lease))).
		Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcd floor: key %q exists", k)
	}
	return func(ctx context.Context) error {
		_, err := m.cli.Delete(ctx, k)
		return err
	}, nil
}
