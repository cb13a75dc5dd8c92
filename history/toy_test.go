package history_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/history"
)

// toy is a small lock service for the checker's own tests: correct by
// default, with one switch per flaw the checker must catch. It waits by
// polling, which is fine for a test double and wrong for a real backend.
type toy struct {
	flaw flaw
	// lossy, while set, makes every request fail: half of them before the
	// service applies them, half after (the reply is lost). The nemesis of
	// the tests sets it.
	lossy atomic.Bool
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
	// Refresh reports success but does not extend the lock: the service
	// expires it a TTL after its grant while its holder believes it holds.
	flawRefreshLies flaw = "refresh-lies"
)

var errOutage = errors.New("toy: connection reset")

// outage runs apply, or not, as a lossy network would; the caller returns
// the error when it is not nil.
func (s *toy) outage(apply func()) error {
	if !s.lossy.Load() {
		apply()
		return nil
	}
	if rand.IntN(2) == 0 {
		apply()
	}
	return errOutage
}

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
	var l driver.Lock
	var err error
	if lerr := s.outage(func() { l, err = c.grant(req, start) }); lerr != nil {
		return nil, lerr
	}
	return l, err
}

func (c *toyClient) grant(req *driver.Request, start time.Time) (driver.Lock, error) {
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
	var err error
	if lerr := s.outage(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		h := s.locks[l.key]
		if !live(h) || h.owner != l.owner {
			err = locker.ErrLeaseLost
			return
		}
		if s.flaw == flawRefreshLies {
			return
		}
		h.expires = now.Add(ttl)
	}); lerr != nil {
		return lerr
	}
	return err
}

func (l *toyLock) Release(context.Context) error {
	s := l.c.s
	var err error
	if lerr := s.outage(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		h := s.locks[l.key]
		if s.flaw != flawUnconditionalRelease && (!live(h) || h.owner != l.owner) {
			err = locker.ErrLeaseLost
			return
		}
		delete(s.locks, l.key)
	}); lerr != nil {
		return lerr
	}
	return err
}

// replyLoss is a nemesis over the toy: every other TTL, for half a TTL,
// requests fail, half of them after taking effect.
type replyLoss struct {
	s   *toy
	ttl time.Duration
}

func (n replyLoss) Run(ctx context.Context, faults *history.Faults) error {
	defer n.s.lossy.Store(false)
	for {
		t := time.NewTimer(n.ttl)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		end := faults.Begin("reply loss")
		n.s.lossy.Store(true)
		t.Reset(n.ttl / 2)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		n.s.lossy.Store(false)
		end()
		t.Stop()
	}
}
