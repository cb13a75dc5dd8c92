package conformance_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// toy is a small lock service for the suite's own tests: correct by default,
// with switches for the flaws the suite must catch. It waits by polling,
// which is fine for a test double and wrong for a real backend.
type toy struct {
	mu    sync.Mutex
	locks map[string]*toyHold
	fence map[string]uint64
	flaw  string
}

type toyHold struct {
	owner   driver.OwnerID
	expires time.Time
}

const (
	flawConstantTokens       = "constant-tokens"       // every token is 1
	flawUnconditionalRelease = "unconditional-release" // release deletes whoever holds
	flawNeverExpire          = "never-expire"          // the service never frees an unrefreshed lock
	flawLeakyClose           = "leaky-close"           // Close leaves a goroutine running for good
)

func newToy(flaw string) *toy {
	return &toy{locks: map[string]*toyHold{}, fence: map[string]uint64{}, flaw: flaw}
}

// live reports whether h still holds; toy.mu is held.
func (s *toy) live(h *toyHold) bool {
	return h != nil && (s.flaw == flawNeverExpire || time.Now().Before(h.expires))
}

type toyClient struct {
	s    *toy
	dead atomic.Bool
}

type errDead struct{}

func (errDead) Error() string { return "toy: client is dead" }

func (c *toyClient) Name() string { return "toy" }
func (c *toyClient) Close() error {
	if c.s.flaw == flawLeakyClose {
		go func() { select {} }()
	}
	return nil
}

func (c *toyClient) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	if c.dead.Load() {
		return nil, errDead{}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := time.Now()
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live(s.locks[req.Key]) {
		return nil, locker.ErrLocked
	}
	s.fence[req.Key]++
	token := s.fence[req.Key]
	if s.flaw == flawConstantTokens {
		token = 1
	}
	s.locks[req.Key] = &toyHold{owner: req.Owner, expires: start.Add(req.TTL)}
	return &toyLock{c: c, key: req.Key, owner: req.Owner, token: token, start: start}, nil
}

func (c *toyClient) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	for {
		l, err := c.TryAcquire(ctx, req)
		if err != locker.ErrLocked {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

type toyLock struct {
	c     *toyClient
	key   string
	owner driver.OwnerID
	token uint64
	start time.Time
}

func (l *toyLock) Token() uint64    { return l.token }
func (l *toyLock) Start() time.Time { return l.start }

func (l *toyLock) Refresh(_ context.Context, ttl time.Duration) error {
	if l.c.dead.Load() {
		return errDead{}
	}
	now := time.Now()
	s := l.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.locks[l.key]
	if !s.live(h) || h.owner != l.owner {
		return locker.ErrLeaseLost
	}
	h.expires = now.Add(ttl)
	return nil
}

func (l *toyLock) Release(context.Context) error {
	if l.c.dead.Load() {
		return errDead{}
	}
	s := l.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.locks[l.key]
	if s.flaw != flawUnconditionalRelease && (!s.live(h) || h.owner != l.owner) {
		return locker.ErrLeaseLost
	}
	delete(s.locks, l.key)
	return nil
}

// toyHarness runs the suite over one toy service.
type toyHarness struct {
	s       *toy
	mu      sync.Mutex
	clients map[locker.Locker]*toyClient
}

func newToyHarness(flaw string) *toyHarness {
	return &toyHarness{s: newToy(flaw), clients: map[locker.Locker]*toyClient{}}
}

func (h *toyHarness) NewLocker(_ context.Context, _ *testing.T, opts ...locker.Option) (locker.Locker, error) {
	c := &toyClient{s: h.s}
	l, err := locker.New(c, opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.clients[l] = c
	h.mu.Unlock()
	return l, nil
}

// TTL is two seconds, as the server backends' harnesses: a lease refreshed
// every quarter of it must outlive a loaded machine's scheduling delays. At
// 300 ms, and then at 1 s, fresh-clone runs beside two CPU-bound processes
// (load 25–34, 2026-12-03) lost a refreshed lease ("Refresh: locker: lease
// lost: deadline passed without a successful refresh").
func (h *toyHarness) TTL() time.Duration { return 2 * time.Second }

func (h *toyHarness) Crash(_ *testing.T, l locker.Locker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients[l].dead.Store(true)
}
