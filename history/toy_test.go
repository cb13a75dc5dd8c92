package history_test

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// toy is a small lock service for the checker's own tests: correct by
// default, with one switch per flaw the checker must catch. It waits by
// polling, which is fine for a test double and wrong for a real backend.
type toy struct {
	flaw  flaw
	mu    sync.Mutex
	locks map[string]*toyHold
	fence map[string]uint64
}

type flaw string

const (
	sound flaw = ""
	// Every token is handed out twice: 1, 1, 2, 2, …
	flawRepeatTokens flaw = "repeat-tokens"
	// Tokens count down.
	flawBackwardsTokens flaw = "backwards-tokens"
	// Release deletes whoever holds the key, not only its own lock.
	flawUnconditionalRelease flaw = "unconditional-release"
	// Lock.Start lies an hour into the future, so the local deadline never
	// comes while the service still expires the lock after its TTL.
	flawLyingStart flaw = "never-expires-locally"
	// Acquisition takes the key even when another owner holds it.
	flawIgnoreHeld flaw = "acquire-ignores-held-lock"
)

type toyHold struct {
	owner   driver.OwnerID
	expires time.Time
}

func newToy(f flaw) *toy {
	return &toy{flaw: f, locks: map[string]*toyHold{}, fence: map[string]uint64{}}
}

// live reports whether h still holds; toy.mu is held.
func live(h *toyHold) bool { return h != nil && time.Now().Before(h.expires) }

// newLocker makes a client of the toy service.
func (s *toy) newLocker(context.Context) (locker.Locker, error) {
	return locker.New(&toyClient{s: s})
}

type toyClient struct{ s *toy }

func (c *toyClient) Name() string { return "toy" }
func (c *toyClient) Close() error { return nil }

func (c *toyClient) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := time.Now()
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if live(s.locks[req.Key]) && s.flaw != flawIgnoreHeld {
		return nil, locker.ErrLocked
	}
	s.fence[req.Key]++
	n := s.fence[req.Key]
	token := n
	switch s.flaw {
	case flawRepeatTokens:
		token = (n + 1) / 2
	case flawBackwardsTokens:
		token = 1<<20 - n
	}
	s.locks[req.Key] = &toyHold{owner: req.Owner, expires: start.Add(req.TTL)}
	l := &toyLock{c: c, key: req.Key, owner: req.Owner, token: token, start: start}
	if s.flaw == flawLyingStart {
		l.start = start.Add(time.Hour)
	}
	return l, nil
}

func (c *toyClient) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	for {
		l, err := c.TryAcquire(ctx, req)
		if err != locker.ErrLocked {
			return l, err
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
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
	now := time.Now()
	s := l.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.locks[l.key]
	if !live(h) || h.owner != l.owner {
		return locker.ErrLeaseLost
	}
	h.expires = now.Add(ttl)
	return nil
}

func (l *toyLock) Release(context.Context) error {
	s := l.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.locks[l.key]
	if s.flaw != flawUnconditionalRelease && (!live(h) || h.owner != l.owner) {
		return locker.ErrLeaseLost
	}
	delete(s.locks, l.key)
	return nil
}
