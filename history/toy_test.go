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
	// lag, while a follower is cut off, is how far behind the leader its
	// view is; refreshes go to it. grants is the leader's log it replays
	// (toy.mu guards both).
	lag    time.Duration
	grants map[string][]toyGrant
	// clockStep is how far the server's clock has been stepped back.
	clockStep time.Duration
	// stalled, while set, is a stalled disk: no write is applied, so every
	// grant, refresh and release waits (until the stall ends or its caller
	// gives up), while locks go on expiring.
	stalled atomic.Bool
	// attempts counts the attempts on free keys (flawRefuseFree).
	attempts int
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
	// Every second attempt on a free key is refused (ErrLocked) anyway.
	flawRefuseFree flaw = "refuses-a-free-lock"
	// Refresh reports success but does not extend the lock: the service
	// expires it a TTL after its grant while its holder believes it holds.
	flawRefreshLies flaw = "refresh-lies"
	// Refresh trusts a stale read: while a follower is cut off from its
	// leader (the staleFollower nemesis), it answers refreshes from what
	// it last saw, without extending anything on the leader — ZooKeeper's
	// plain Exists served by a stale follower (issue 15, item 7).
	flawStaleRefresh flaw = "refresh-trusts-stale-read"
	// Tokens come from the server's clock alone, with no counter carried
	// across grants: a clock stepped back (the clockStep nemesis) hands out
	// smaller tokens.
	flawClockTokens flaw = "tokens-from-clock-alone"
	// After a failover (the failover nemesis) the promoted replica has the
	// locks but not their owners, and refresh and release take a missing
	// owner for a match: a late release of an old holder deletes the lock
	// of whoever holds it now.
	flawFailoverRelease flaw = "release-ignores-owner-after-failover"
	// When its stalled disk resumes (the diskStall nemesis), the service
	// frees every lock, refreshed or not: etcd#15247, where a leader whose
	// fdatasync had stalled revoked every lease.
	flawStallFreesAll flaw = "stall-frees-every-lock"
)

var errOutage = errors.New("toy: connection reset")

// waitStall waits while the disk is stalled; it returns ctx's error if the
// caller gave up first.
func (s *toy) waitStall(ctx context.Context) error {
	for s.stalled.Load() {
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

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

type toyGrant struct {
	at    time.Time
	owner driver.OwnerID
}

// staleOwner is the holder of key that a follower lagging by s.lag
// lists: the last grant it has seen, whose expiry it has not heard of.
func (s *toy) staleOwner(key string) (owner driver.OwnerID, ok bool) {
	seen := time.Now().Add(-s.lag)
	for _, g := range s.grants[key] {
		if g.at.After(seen) {
			break
		}
		owner, ok = g.owner, true
	}
	return owner, ok
}

type toyHold struct {
	owner   driver.OwnerID
	expires time.Time
}

func newToy(f flaw) *toy {
	return &toy{flaw: f, locks: map[string]*toyHold{}, fence: map[string]uint64{}, grants: map[string][]toyGrant{}}
}

// ownerLost reports whether h came through a failover that, with
// flawFailoverRelease, lost its owner, which the service then takes for
// anyone's; toy.mu is held.
func (s *toy) ownerLost(h *toyHold) bool {
	return s.flaw == flawFailoverRelease && h.owner == driver.OwnerID{}
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
	if err := s.waitStall(ctx); err != nil {
		return nil, err
	}
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
	if s.flaw == flawRefuseFree {
		if s.attempts++; s.attempts%2 == 0 {
			return nil, locker.ErrLocked
		}
	}
	s.fence[req.Key]++
	n := s.fence[req.Key]
	token := n
	switch s.flaw {
	case flawRepeatTokens:
		token = (n + 1) / 2
	case flawBackwardsTokens:
		token = 1<<20 - n
	case flawClockTokens:
		token = uint64(start.Add(-s.clockStep).UnixMicro())
	}
	s.locks[req.Key] = &toyHold{owner: req.Owner, expires: start.Add(req.TTL)}
	if s.flaw == flawStaleRefresh {
		s.grants[req.Key] = append(s.grants[req.Key], toyGrant{at: time.Now(), owner: req.Owner})
	}
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

func (l *toyLock) Refresh(ctx context.Context, ttl time.Duration) error {
	s := l.c.s
	if err := s.waitStall(ctx); err != nil {
		return err
	}
	now := time.Now()
	var err error
	if lerr := s.outage(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lag > 0 {
			// The follower that serves this client is cut off. A sound
			// service cannot confirm the lock there and fails the call.
			if s.flaw != flawStaleRefresh {
				err = errOutage
				return
			}
			// The flawed one reads its lagging view: it lists the lock,
			// not having heard of the expiry or of the next grant.
			if owner, ok := s.staleOwner(l.key); !ok || owner != l.owner {
				err = locker.ErrLeaseLost
			}
			return
		}
		h := s.locks[l.key]
		if !live(h) || (h.owner != l.owner && !s.ownerLost(h)) {
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

func (l *toyLock) Release(ctx context.Context) error {
	s := l.c.s
	if err := s.waitStall(ctx); err != nil {
		return err
	}
	var err error
	if lerr := s.outage(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		h := s.locks[l.key]
		if s.flaw != flawUnconditionalRelease && (!live(h) || (h.owner != l.owner && !s.ownerLost(h))) {
			err = locker.ErrLeaseLost
			return
		}
		delete(s.locks, l.key)
	}); lerr != nil {
		return lerr
	}
	return err
}

// toyFault is a nemesis over the toy: after each gap, the fault named is
// on for a while.
type toyFault struct {
	name       string
	gap, lasts time.Duration
	on, off    func()
}

// replyLoss loses requests and replies: half of the failed requests took
// effect.
func replyLoss(s *toy, ttl time.Duration) toyFault {
	return toyFault{"reply loss", ttl, ttl / 2, func() { s.lossy.Store(true) }, func() { s.lossy.Store(false) }}
}

// staleFollower cuts off the follower that answers refreshes, for longer
// than a TTL: its view lags the leader by a tenth of a TTL while the
// leader expires and grants.
func staleFollower(s *toy, ttl time.Duration) toyFault {
	return toyFault{"follower cut off", ttl / 2, 2 * ttl,
		func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lag = ttl / 10
		},
		func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lag = 0
		}}
}

// diskStall stalls the service's disk for a quarter of a TTL: calls wait
// for it to resume, and the holders' deadlines outlast it.
func diskStall(s *toy, ttl time.Duration) toyFault {
	return toyFault{"disk stall", ttl / 2, ttl / 4, func() { s.stalled.Store(true) }, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.flaw == flawStallFreesAll && s.stalled.Load() {
			clear(s.locks)
		}
		s.stalled.Store(false)
	}}
}

// clockStep steps the server's wall clock back by ten TTLs each time.
func clockStep(s *toy, ttl time.Duration) toyFault {
	return toyFault{"clock stepped back", ttl, ttl / 2,
		func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.clockStep += 10 * ttl
		},
		func() {}}
}

// failover promotes a replica: it has every lock and its expiry; with
// flawFailoverRelease it lacks their owners.
func failover(s *toy, ttl time.Duration) toyFault {
	return toyFault{"failover", ttl, ttl / 2,
		func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for k, h := range s.locks {
				promoted := *h
				if s.flaw == flawFailoverRelease {
					promoted.owner = driver.OwnerID{}
				}
				s.locks[k] = &promoted
			}
		},
		func() {}}
}

func (n toyFault) Run(ctx context.Context, faults *history.Faults) error {
	defer n.off()
	for {
		t := time.NewTimer(n.gap)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		end := faults.Begin(n.name)
		n.on()
		t.Reset(n.lasts)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		n.off()
		end()
		t.Stop()
	}
}
