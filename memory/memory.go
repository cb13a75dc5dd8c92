// Package memory is the in-process backend of locker: the embedded default
// for development and tests, and the reference implementation every other
// backend is measured against.
//
// Lockers over one Store exclude each other, with the full contract of
// package locker: TTL expiry, fencing tokens, FIFO waiters handed the lock
// directly on release (no polling), and cancelled waits that leave nothing
// behind. A Store lives as long as the process; it offers no protection
// between processes.
//
// # URLs
//
// Importing the package registers the scheme "memory":
//
//	memory://       the process-wide default Store
//	memory://name   the process-wide Store called name
//
// so that two parts of one program configured with the same URL share locks,
// as they would with a networked backend.
//
// # Fencing tokens
//
// Tokens count up from 1 per key. The Store keeps the last token of every key
// it has ever granted (eight bytes a key), so a key that is freed and taken
// again never repeats a token for the Store's lifetime.
package memory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "memory"

func init() { locker.Register(Scheme, locker.BackendOpener(open)) }

var named = struct {
	sync.Mutex
	stores map[string]*Store
}{stores: map[string]*Store{}}

// Named returns the process-wide Store called name, creating it on first use.
// The URL memory://name opens a Locker over it.
func Named(name string) *Store {
	named.Lock()
	defer named.Unlock()
	s := named.stores[name]
	if s == nil {
		s = NewStore()
		named.stores[name] = s
	}
	return s
}

func open(_ context.Context, u *url.URL) (driver.Backend, error) {
	var extra string
	switch {
	case u.User != nil:
		extra = "user"
	case u.Port() != "":
		extra = "port"
	case strings.Trim(u.Path, "/") != "":
		extra = "path " + u.Path
	case u.RawQuery != "":
		extra = "query parameters " + u.RawQuery
	}
	if extra != "" {
		return nil, fmt.Errorf("%w: unexpected %s (want memory:// or memory://name)", locker.ErrInvalidURL, extra)
	}
	return newBackend(Named(u.Hostname())), nil
}

// New returns a Locker over store: the Store plays the part a server client
// plays for the other backends. A nil store is the process-wide default
// Store, the one memory:// opens, so that a program moved from a URL to a
// constructor keeps excluding the same Lockers; NewStore makes a private one.
// The package has no options of its own.
func New(store *Store, opts ...locker.Option) (locker.Locker, error) {
	if store == nil {
		store = Named("")
	}
	return locker.New(newBackend(store), opts...)
}

// Inspect implements driver.Inspector.
func (b *backend) Inspect(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := b.check(ctx); err != nil {
		return driver.LockInfo{}, err
	}
	return b.store.info(key), nil
}

// List implements driver.Inspector, in key order; the cursor is the last
// key listed.
func (b *backend) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.LockInfo, string, error) {
	if err := b.check(ctx); err != nil {
		return nil, "", err
	}
	locks, next := b.store.list(prefix, cursor, limit)
	return locks, next, nil
}

// errDisconnected is what a killed backend answers (a test hook standing for a
// crashed client: its locks stay on the Store until their TTL).
var errDisconnected = errors.New("memory: client disconnected")

type backend struct {
	store *Store
	dead  atomic.Bool

	// closed is cancelled by Close: it ends the backend's watches.
	closed context.Context
	close  context.CancelFunc
}

func newBackend(s *Store) *backend {
	b := &backend{store: s}
	b.closed, b.close = context.WithCancel(context.Background())
	return b
}

func (b *backend) Name() string { return Scheme }

func (b *backend) check(ctx context.Context) error {
	if b.dead.Load() {
		return errDisconnected
	}
	return ctx.Err()
}

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	h, err := b.store.try(req)
	if err != nil {
		return nil, err
	}
	return &lock{b: b, key: req.Key, h: h}, nil
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	h, w, err := b.store.enqueue(req)
	if err != nil {
		return nil, err
	}
	if h != nil {
		return &lock{b: b, key: req.Key, h: h}, nil
	}
	select {
	case <-w.ready:
		wakeups.Add(1)
		return &lock{b: b, key: req.Key, h: w.grant}, nil
	case <-ctx.Done():
		b.store.cancel(req.Key, w)
		return nil, ctx.Err()
	}
}

func (b *backend) Close() error {
	b.close()
	return nil
}

// Publish implements driver.Publisher.
func (b *backend) Publish(ctx context.Context, dl driver.Lock, value string) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	l, ok := dl.(*lock)
	if !ok || l.b.store != b.store {
		return fmt.Errorf("%w: not a lock of this store", locker.ErrLeaseLost)
	}
	return b.store.publish(l.key, l.h, value)
}

// Watch implements driver.Watcher: the Store signals every grant, release,
// expiry and publish of the key.
func (b *backend) Watch(ctx context.Context, key string) (<-chan struct{}, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	sig := b.store.watch(key)
	// One goroutine relays the store's signals to out, and closes out when
	// ctx ends or the backend closes (after taking sig off the store, which
	// never closes a channel it may still signal).
	out := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(b.closed, cancel)
	go func() {
		defer close(out)
		defer stopOnClose()
		defer b.store.unwatch(key, sig)
		for {
			select {
			case <-sig:
				select {
				case out <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Permits implements driver.Permits: a key admits Request.Limit holders.
func (b *backend) Permits() {}

// MinHolds implements driver.MinHolds: a lock lives at least
// Request.MinHold on the store.
func (b *backend) MinHolds() {}

type lock struct {
	b   *backend
	key string
	h   *holding
}

func (l *lock) Token() uint64    { return l.h.token }
func (l *lock) Start() time.Time { return l.h.start }

func (l *lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := l.b.check(ctx); err != nil {
		return err
	}
	return l.b.store.refresh(l.key, l.h, ttl)
}

func (l *lock) Release(ctx context.Context) error {
	if err := l.b.check(ctx); err != nil {
		return err
	}
	return l.b.store.release(l.key, l.h)
}
