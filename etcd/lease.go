package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/distlock/locker"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxLeaseTTL is the longest lease etcd grants (its MaxLeaseTTL, in seconds).
const maxLeaseTTL = 9_000_000_000

// RoundTTL implements driver.TTLRounder. etcd leases live whole seconds, so
// a TTL is rounded up to the next second, and to at least the server's
// minimum once a grant has shown it (see the package doc).
func (b *backend) RoundTTL(ttl time.Duration) (time.Duration, error) {
	secs := int64(math.Ceil(ttl.Seconds()))
	if secs < 1 {
		secs = 1
	}
	if m := b.serverMin.Load(); secs < m {
		secs = m
	}
	if secs+reserve(secs) > maxLeaseTTL {
		return 0, fmt.Errorf("%w: TTL %v is longer than etcd's longest lease", locker.ErrInvalidOption, ttl)
	}
	return time.Duration(secs) * time.Second, nil
}

// reserve is how many seconds a shared lease lives beyond the lock TTL it
// serves (the R of the package doc): a fifth of the TTL, at least a second.
// The lease is renewed three times per reserve, so a lock granted at any
// moment finds the lease alive for at least its full TTL without a renewal
// on the acquire path.
func reserve(ttlSecs int64) int64 {
	return max(1, (ttlSecs+4)/5)
}

// errLeaseExpired is the cause reported when a shared lease is gone.
var errLeaseExpired = errors.New("etcd: lease expired or revoked on the server")

// sharedLease is one etcd lease serving every lock and waiter of one TTL in
// one backend. It is renewed in the background for as long as the backend is
// open; renewals go one at a time over a stream kept open (keepAlive), so
// the time each was sent is known exactly and bounds the lease's life on
// the server from below.
type sharedLease struct {
	b        *backend
	id       clientv3.LeaseID
	ttl      time.Duration // the lock TTL it serves (T)
	leaseTTL time.Duration // what the server granted (L ≥ T + reserve)
	done     chan struct{} // closed when the lease is dead
	ka       *keepAlive    // renewals, the loop's and Refresh's

	mu      sync.Mutex
	renewed time.Time // when the latest successful grant/renewal was sent
	users   map[*lock]struct{}
	slots   map[slot]struct{} // waiter key names in use on this lease
	cause   error             // why the lease died
}

// validFrom is the earliest Start a lock on this lease may claim: the lease
// lives on the server at least until renewed + leaseTTL, so a lock that lives
// ttl from validFrom is covered.
func (s *sharedLease) validFrom() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed.Add(s.leaseTTL - s.ttl)
}

// markRenewed records a successful renewal sent at sent.
func (s *sharedLease) markRenewed(sent time.Time) {
	s.mu.Lock()
	if sent.After(s.renewed) {
		s.renewed = sent
	}
	s.mu.Unlock()
}

// err returns why the lease died, or nil while it lives.
func (s *sharedLease) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// placeLost is the error of an Acquire that waited on s when s died:
// errPlaceLost with the cause, so that it queues again — or the cause alone
// when the Locker closed.
func (s *sharedLease) placeLost() error {
	cause := s.err()
	if errors.Is(cause, locker.ErrClosed) {
		return cause
	}
	return fmt.Errorf("%w: %w", errPlaceLost, cause)
}

// add registers a granted lock for loss reports; false if the lease is dead.
func (s *sharedLease) add(l *lock) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		return false
	}
	s.users[l] = struct{}{}
	return true
}

func (s *sharedLease) remove(l *lock) {
	s.mu.Lock()
	delete(s.users, l)
	s.mu.Unlock()
}

// slot is one waiter key name of a lease: a lock's range and a number.
type slot struct {
	prefix string
	n      int
}

// ownKey is the etcd key of one acquisition.
type ownKey struct {
	sl    *sharedLease
	slot  slot
	name  string
	tomb  string // tombstoneKey of name
	rec   record // as created; Publish replaces the value on the server
	value string // rec encoded
	freed bool   // under sl.mu: the slot went back, maybe to another acquisition
}

// claim reserves the lowest free waiter key name of the lock range prefix
// on this lease for one acquisition. The name stays reserved until the key
// is known to be gone (free), so no two acquisitions ever use it at once.
func (s *sharedLease) claim(prefix string, rec record) *ownKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := slot{prefix: prefix}
	for ; ; k.n++ {
		if _, used := s.slots[k]; !used {
			break
		}
	}
	if s.slots != nil {
		s.slots[k] = struct{}{}
	}
	name := waiterKey(prefix, s.id, k.n)
	return &ownKey{sl: s, slot: k, name: name, tomb: tombstoneKey(s.b.prefix, name), rec: rec, value: rec.encode()}
}

// notTombstoned is the compare every create txn of k makes: k's name has
// no tombstone (see backend.deleteOwn).
func (k *ownKey) notTombstoned() clientv3.Cmp {
	return clientv3.Compare(clientv3.Version(k.tomb), "=", 0)
}

// free returns the name for reuse once the key is known to be gone. A name
// whose key's fate is unknown is never freed: it dies with its lease.
func (k *ownKey) free() {
	k.sl.mu.Lock()
	if !k.freed {
		k.freed = true
		delete(k.sl.slots, k.slot)
	}
	k.sl.mu.Unlock()
}

// die marks the lease dead, takes it out of the pool and tells every lock
// on it that it is lost.
func (s *sharedLease) die(cause error) {
	s.mu.Lock()
	if s.cause != nil {
		s.mu.Unlock()
		return
	}
	s.cause = cause
	users := make([]*lock, 0, len(s.users))
	for l := range s.users {
		users = append(users, l)
	}
	s.users, s.slots = nil, nil
	close(s.done)
	s.mu.Unlock()

	s.b.mu.Lock()
	if s.b.leases[s.ttl] == s {
		delete(s.b.leases, s.ttl)
	}
	s.b.mu.Unlock()
	if !errors.Is(cause, locker.ErrClosed) {
		s.b.log.Warn("etcd: shared lease lost", "lease", int64(s.id), "ttl", s.ttl, "locks", len(users), "cause", cause)
	}
	for _, l := range users {
		if l.lost != nil {
			l.lost(cause)
		}
	}
}

// goneOn reports whether err, the error of a request made with the lease,
// says the server no longer has it ("requested lease not found": expired
// there before the client's renewals could tell, or revoked). The request
// wrote nothing, and the lease is marked dead, as its next renewal would.
func (s *sharedLease) goneOn(err error) bool {
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false
	}
	s.die(errLeaseExpired)
	return true
}

// renewLoop keeps the lease alive until the backend closes or the lease
// dies. A renewal that cannot reach the server is retried at the next tick;
// once no renewal has succeeded for a whole lease TTL the server has freed
// the lease, and it is declared dead.
func (s *sharedLease) renewLoop(ctx context.Context) {
	defer s.b.wg.Done()
	interval := (s.leaseTTL - s.ttl) / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	defer s.ka.close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-t.C:
		}
		sent, err := s.ka.renew(ctx, interval, nil)
		switch {
		case err == nil:
			s.markRenewed(sent)
		case s.goneOn(err):
			return
		case ctx.Err() != nil:
			return
		default:
			s.b.log.Debug("etcd: lease renewal failed", "lease", int64(s.id), "err", err)
			s.mu.Lock()
			stale := time.Since(s.renewed) >= s.leaseTTL
			s.mu.Unlock()
			if stale {
				s.die(fmt.Errorf("%w: not renewed for %v: %w", errLeaseExpired, s.leaseTTL, err))
				return
			}
		}
	}
}

// renew renews the lease now, for a refresh that finds the last background
// renewal too old to cover its TTL.
func (s *sharedLease) renew(ctx context.Context, timeout time.Duration) error {
	sent, err := s.ka.renew(ctx, timeout, func() bool { return !s.validFrom().Before(time.Now()) })
	if err != nil {
		if s.goneOn(err) {
			return fmt.Errorf("%w: %w", locker.ErrLeaseLost, errLeaseExpired)
		}
		return err
	}
	s.markRenewed(sent)
	return nil
}

// lease returns the live shared lease for ttl, granting one if needed.
func (b *backend) lease(ctx context.Context, ttl time.Duration) (*sharedLease, error) {
	b.mu.Lock()
	s := b.leases[ttl]
	b.mu.Unlock()
	if s != nil {
		return s, nil
	}
	// One grant at a time, so that concurrent first acquisitions share one
	// lease instead of granting one each.
	select {
	case b.grantSem <- struct{}{}:
		defer func() { <-b.grantSem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b.mu.Lock()
	s = b.leases[ttl]
	b.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return b.grant(ctx, ttl)
}

func (b *backend) grant(ctx context.Context, ttl time.Duration) (*sharedLease, error) {
	secs := int64(ttl / time.Second)
	want := secs + reserve(secs)
	rctx, cancel := b.requestContext(ctx)
	defer cancel()
	sent := time.Now()
	resp, err := b.cli.Grant(rctx, want)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	if resp.TTL < want {
		// etcd only ever raises a TTL; a shorter one would break the bound.
		b.revokeLater(resp.ID)
		return nil, fmt.Errorf("grant lease: asked for %ds, server granted %ds", want, resp.TTL)
	}
	if resp.TTL > want {
		// The server's minimum lease TTL (1.5 × its election timeout) is
		// above ours: round later TTLs up so that a crashed holder's lock is
		// bounded as documented.
		b.raiseServerMin(resp.TTL - reserve(secs))
	}
	s := &sharedLease{
		b: b, id: resp.ID, ttl: ttl, leaseTTL: time.Duration(resp.TTL) * time.Second,
		done: make(chan struct{}), renewed: sent, users: map[*lock]struct{}{},
		ka:    &keepAlive{cli: b.cli, id: resp.ID, base: b.ctx},
		slots: map[slot]struct{}{},
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.revokeLater(resp.ID)
		return nil, locker.ErrClosed
	}
	b.leases[ttl] = s
	b.wg.Add(1)
	b.mu.Unlock()
	go s.renewLoop(b.ctx)
	return s, nil
}

func (b *backend) raiseServerMin(secs int64) {
	for {
		cur := b.serverMin.Load()
		if secs <= cur || b.serverMin.CompareAndSwap(cur, secs) {
			return
		}
	}
}

// revokeLater revokes a lease this backend will not use, in the background.
func (b *backend) revokeLater(id clientv3.LeaseID) {
	b.background(func(ctx context.Context) {
		rctx, cancel := b.requestContext(ctx)
		defer cancel()
		_, _ = b.cli.Revoke(rctx, id)
	})
}
