package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/places"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Scheme is the URL scheme this package registers with locker.Register.
const Scheme = "etcd"

// revokeTimeout bounds each revoke on Close: a lease that cannot be revoked
// quickly expires on its own, so Close need not wait on a dead cluster.
const revokeTimeout = time.Second

// New returns a Locker over an etcd client the caller owns: closing the
// Locker revokes the leases it granted but leaves cli open. opts mix
// locker's options (WithTTL, WithNamespace, WithLogger, …) with this
// package's (WithPrefix, WithRequestTimeout); a bad one is refused with an
// error wrapping locker.ErrInvalidOption.
func New(cli *clientv3.Client, opts ...locker.Option) (locker.Locker, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd: nil client", locker.ErrInvalidOption)
	}
	c, err := splitOptions(opts)
	if err != nil {
		return nil, err
	}
	return newLocker(cli, false, c)
}

// newLocker makes the Locker of New and of a URL, over a client that the
// Locker owns (closes) or not.
func newLocker(cli *clientv3.Client, owned bool, c config) (locker.Locker, error) {
	b := newBackend(cli, c, owned)
	l, err := locker.New(b, c.rest...)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return l, nil
}

// backend implements driver.Backend and driver.TTLRounder over one client.
type backend struct {
	cli     *clientv3.Client
	owned   bool // cli was made by the opener: Close closes it
	prefix  string
	timeout time.Duration
	log     *slog.Logger // WithLogger's: background events

	// ctx ends when the backend closes; it bounds every goroutine.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	grantSem  chan struct{}
	serverMin atomic.Int64 // the server's minimum lock TTL in seconds, once known

	mu     sync.Mutex
	closed bool
	leases map[time.Duration]*sharedLease // by lock TTL

	places *places.Set // by lock range: see maxQueued
}

func newBackend(cli *clientv3.Client, c config, owned bool) *backend {
	b := &backend{
		cli: cli, owned: owned, prefix: c.prefix, timeout: c.requestTimeout, log: c.logger,
		grantSem: make(chan struct{}, 1), leases: map[time.Duration]*sharedLease{}, places: places.New(maxQueued),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

func (b *backend) Name() string { return Scheme }

// Permits implements driver.Permits: an N-permit lock's holders are the
// keys with its N lowest create revisions (see Acquire).
func (b *backend) Permits() {}

// requestContext bounds one request by the request timeout.
func (b *backend) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// background runs fn in a goroutine that Close cancels and waits for;
// false, without running it, once the backend is closed.
func (b *backend) background(fn func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
	return true
}

// Close stops the lease renewals, revokes the leases (which deletes any key
// still attached to them), and closes the client if the backend made it.
func (b *backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	leases := make([]*sharedLease, 0, len(b.leases))
	for _, s := range b.leases {
		leases = append(leases, s)
	}
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()

	// Revoking deletes every key still attached to the leases. It is best
	// effort: a lease that cannot be revoked expires on its own, at most
	// its lease TTL after its last renewal.
	for _, s := range leases {
		if s.err() != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), min(b.timeout, revokeTimeout))
		_, _ = b.cli.Revoke(ctx, s.id)
		cancel()
		s.die(locker.ErrClosed)
	}
	if b.owned {
		return b.cli.Close()
	}
	return nil
}
