package memory

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// A Store is the lock table that Lockers of this package share: the "server".
// Lockers over one Store exclude each other; Lockers over different Stores do
// not. The zero value is not usable; call NewStore.
type Store struct {
	mu       sync.Mutex
	keys     map[string]*keyState
	fence    map[string]uint64                     // last token per key; never deleted, so tokens never repeat
	watchers map[string]map[chan struct{}]struct{} // Watch channels per key
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{keys: map[string]*keyState{}, fence: map[string]uint64{}, watchers: map[string]map[chan struct{}]struct{}{}}
}

// keyState exists while a key is held or waited for.
type keyState struct {
	limit   int        // how many holders the key admits at once (1: a lock)
	holders []*holding // in grant order
	waiters []*waiter  // FIFO
}

type holding struct {
	owner   driver.OwnerID
	label   string
	value   string
	token   uint64
	start   time.Time
	expires time.Time
	timer   *time.Timer
	lost    func(error)
}

type waiter struct {
	req   *driver.Request
	ready chan struct{} // closed when granted
	grant *holding      // set under Store.mu before ready closes
}

var errExpired = errors.New("memory: lock expired on the store")

// limitOf is the number of holders req asks its key to admit.
func limitOf(req *driver.Request) int { return max(req.Limit, 1) }

// state returns the state of req's key, made if missing, or an error when
// the key is in use with another limit.
func (s *Store) stateLocked(req *driver.Request) (*keyState, error) {
	ks := s.keys[req.Key]
	if ks == nil {
		ks = &keyState{limit: limitOf(req)}
		s.keys[req.Key] = ks
	}
	if ks.limit != limitOf(req) {
		return nil, fmt.Errorf("%w: the key admits %d holders at once, this acquisition asks for %d", locker.ErrInvalidOption, ks.limit, limitOf(req))
	}
	return ks, nil
}

// holds reports whether h holds a permit of ks.
func (ks *keyState) holds(h *holding) bool { return ks != nil && slices.Contains(ks.holders, h) }

// free reports whether a permit of ks is free for a newcomer: a free
// permit with waiters is theirs (it never stays free while any wait).
func (ks *keyState) free() bool { return len(ks.holders) < ks.limit && len(ks.waiters) == 0 }

// grantLocked makes req a holder of key; s.mu is held.
func (s *Store) grantLocked(key string, ks *keyState, req *driver.Request, now time.Time) *holding {
	s.fence[key]++
	h := &holding{owner: req.Owner, label: req.Label, value: req.Value, token: s.fence[key], start: now, expires: now.Add(req.TTL), lost: req.Lost}
	h.timer = time.AfterFunc(req.TTL, func() { s.expire(key, h) })
	ks.holders = append(ks.holders, h)
	s.notifyLocked(key)
	return h
}

// freeLocked removes holder h of key and hands the freed permit to the
// first waiter, if any; s.mu is held.
func (s *Store) freeLocked(key string, ks *keyState, h *holding) {
	h.timer.Stop()
	ks.holders = slices.DeleteFunc(ks.holders, func(x *holding) bool { return x == h })
	s.notifyLocked(key)
	if len(ks.waiters) == 0 {
		if len(ks.holders) == 0 {
			delete(s.keys, key)
		}
		return
	}
	w := ks.waiters[0]
	ks.waiters = ks.waiters[1:]
	w.grant = s.grantLocked(key, ks, w.req, time.Now())
	close(w.ready)
}

func (s *Store) expire(key string, h *holding) {
	s.mu.Lock()
	ks := s.keys[key]
	if !ks.holds(h) || time.Now().Before(h.expires) {
		// Released, or refreshed after the timer fired (Reset re-armed it).
		s.mu.Unlock()
		return
	}
	s.freeLocked(key, ks, h)
	s.mu.Unlock()
	if h.lost != nil {
		h.lost(errExpired)
	}
}

// try grants key to req if a permit is free.
func (s *Store) try(req *driver.Request) (*holding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks, err := s.stateLocked(req)
	if err != nil {
		return nil, err
	}
	if !ks.free() {
		return nil, locker.ErrLocked
	}
	return s.grantLocked(req.Key, ks, req, time.Now()), nil
}

// enqueue grants key to req if a permit is free, or queues req behind the
// others.
func (s *Store) enqueue(req *driver.Request) (*holding, *waiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks, err := s.stateLocked(req)
	if err != nil {
		return nil, nil, err
	}
	if ks.free() {
		return s.grantLocked(req.Key, ks, req, time.Now()), nil, nil
	}
	w := &waiter{req: req, ready: make(chan struct{})}
	ks.waiters = append(ks.waiters, w)
	return nil, w, nil
}

// cancel takes w out of its queue. If w was granted meanwhile, the grant is
// given up and passed on, so a cancelled wait leaves nothing behind.
func (s *Store) cancel(key string, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil {
		return
	}
	if w.grant != nil {
		if ks.holds(w.grant) {
			s.freeLocked(key, ks, w.grant)
		}
		return
	}
	ks.waiters = slices.DeleteFunc(ks.waiters, func(x *waiter) bool { return x == w })
	if len(ks.holders) == 0 && len(ks.waiters) == 0 {
		delete(s.keys, key)
	}
}

func (s *Store) refresh(key string, h *holding, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keys[key].holds(h) {
		return locker.ErrLeaseLost
	}
	h.expires = time.Now().Add(ttl)
	h.timer.Reset(ttl)
	return nil
}

func (s *Store) publish(key string, h *holding, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keys[key].holds(h) {
		return locker.ErrLeaseLost
	}
	h.value = value
	s.notifyLocked(key)
	return nil
}

// watch registers a channel signalled after each change of key's lock;
// unwatch removes it.
func (s *Store) watch(key string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{}, 1)
	if s.watchers[key] == nil {
		s.watchers[key] = map[chan struct{}]struct{}{}
	}
	s.watchers[key][ch] = struct{}{}
	return ch
}

func (s *Store) unwatch(key string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[key], ch)
	if len(s.watchers[key]) == 0 {
		delete(s.watchers, key)
	}
}

// notifyLocked signals key's watchers without blocking: a watcher that has
// a signal pending coalesces this change into it.
func (s *Store) notifyLocked(key string) {
	for ch := range s.watchers[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Store) release(key string, h *holding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if !ks.holds(h) {
		return locker.ErrLeaseLost
	}
	s.freeLocked(key, ks, h)
	return nil
}

// Holder describes who holds a key, for inspection. It does not carry the
// owner id: that is the capability to release the lock.
type Holder struct {
	Label   string    // the WithOwner label
	Value   string    // the published value (WithValue, Publish)
	Token   uint64    // the fencing token
	Granted time.Time // when the store granted the lock
	Expires time.Time // when the store frees the lock unless refreshed
	Waiters int       // acquisitions queued behind the holder
}

// Holder reports the current holder of a stored key (the namespace, a NUL,
// and the key, when a namespace is used), or false when the key is free.
func (s *Store) Holder(key string) (Holder, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holderLocked(key)
}

func (s *Store) holderLocked(key string) (Holder, bool) {
	ks := s.keys[key]
	if ks == nil || len(ks.holders) == 0 {
		return Holder{}, false
	}
	h := ks.holders[0]
	return Holder{Label: h.label, Value: h.value, Token: h.token, Granted: h.start, Expires: h.expires, Waiters: len(ks.waiters)}, true
}

// info describes a stored key for driver.Inspector.
func (s *Store) info(key string) driver.LockInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infoLocked(key)
}

func (s *Store) infoLocked(key string) driver.LockInfo {
	h, ok := s.holderLocked(key)
	if !ok {
		return driver.LockInfo{Key: key}
	}
	return driver.LockInfo{Key: key, Held: true, Label: h.Label, Value: h.Value, Token: h.Token, Granted: h.Granted,
		TTL: time.Until(h.Expires), Waiters: h.Waiters}
}

// list returns up to limit held keys starting with prefix, in key order,
// after the key cursor.
func (s *Store) list(prefix, cursor string, limit int) ([]driver.LockInfo, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k, ks := range s.keys {
		if len(ks.holders) > 0 && strings.HasPrefix(k, prefix) && k > cursor {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	next := ""
	if len(keys) > limit {
		keys, next = keys[:limit], keys[limit-1]
	}
	out := make([]driver.LockInfo, len(keys))
	for i, k := range keys {
		out[i] = s.infoLocked(k)
	}
	return out, next
}

// pending reports how many keys have state (held or waited for): a test
// hook that shows cancelled waits leave nothing behind.
func (s *Store) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
