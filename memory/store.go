package memory

import (
	"errors"
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
	mu    sync.Mutex
	keys  map[string]*keyState
	fence map[string]uint64 // last token per key; never deleted, so tokens never repeat
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{keys: map[string]*keyState{}, fence: map[string]uint64{}}
}

// keyState exists while a key is held or waited for.
type keyState struct {
	holder  *holding
	waiters []*waiter // FIFO
}

type holding struct {
	owner   driver.OwnerID
	label   string
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

// grantLocked makes req the holder of key; s.mu is held.
func (s *Store) grantLocked(key string, ks *keyState, req *driver.Request, now time.Time) *holding {
	s.fence[key]++
	h := &holding{owner: req.Owner, label: req.Label, token: s.fence[key], start: now, expires: now.Add(req.TTL), lost: req.Lost}
	h.timer = time.AfterFunc(req.TTL, func() { s.expire(key, h) })
	ks.holder = h
	return h
}

// freeLocked removes the holder of key and hands the lock to the first
// waiter, if any; s.mu is held.
func (s *Store) freeLocked(key string, ks *keyState) {
	ks.holder.timer.Stop()
	ks.holder = nil
	if len(ks.waiters) == 0 {
		delete(s.keys, key)
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
	if ks == nil || ks.holder != h || time.Now().Before(h.expires) {
		// Released, or refreshed after the timer fired (Reset re-armed it).
		s.mu.Unlock()
		return
	}
	s.freeLocked(key, ks)
	s.mu.Unlock()
	if h.lost != nil {
		h.lost(errExpired)
	}
}

// try grants key to req if it is free.
func (s *Store) try(req *driver.Request) (*holding, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[req.Key]
	if ks == nil {
		ks = &keyState{}
		s.keys[req.Key] = ks
	}
	if ks.holder != nil {
		return nil, locker.ErrLocked
	}
	return s.grantLocked(req.Key, ks, req, time.Now()), nil
}

// enqueue grants key to req if it is free, or queues req behind the others.
func (s *Store) enqueue(req *driver.Request) (*holding, *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[req.Key]
	if ks == nil {
		ks = &keyState{}
		s.keys[req.Key] = ks
	}
	if ks.holder == nil {
		return s.grantLocked(req.Key, ks, req, time.Now()), nil
	}
	w := &waiter{req: req, ready: make(chan struct{})}
	ks.waiters = append(ks.waiters, w)
	return nil, w
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
		if ks.holder == w.grant {
			s.freeLocked(key, ks)
		}
		return
	}
	for i, x := range ks.waiters {
		if x == w {
			ks.waiters = append(ks.waiters[:i], ks.waiters[i+1:]...)
			break
		}
	}
	if ks.holder == nil && len(ks.waiters) == 0 {
		delete(s.keys, key)
	}
}

func (s *Store) refresh(key string, h *holding, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil || ks.holder != h {
		return locker.ErrLeaseLost
	}
	h.expires = time.Now().Add(ttl)
	h.timer.Reset(ttl)
	return nil
}

func (s *Store) release(key string, h *holding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil || ks.holder != h {
		return locker.ErrLeaseLost
	}
	s.freeLocked(key, ks)
	return nil
}

// Holder describes who holds a key, for inspection. It does not carry the
// owner id: that is the capability to release the lock.
type Holder struct {
	Label   string    // the WithOwner label
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
	if ks == nil || ks.holder == nil {
		return Holder{}, false
	}
	h := ks.holder
	return Holder{Label: h.label, Token: h.token, Granted: h.start, Expires: h.expires, Waiters: len(ks.waiters)}, true
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
	return driver.LockInfo{Key: key, Held: true, Label: h.Label, Token: h.Token, Granted: h.Granted,
		TTL: time.Until(h.Expires), Waiters: h.Waiters}
}

// list returns up to limit held keys starting with prefix, in key order,
// after the key cursor.
func (s *Store) list(prefix, cursor string, limit int) ([]driver.LockInfo, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k, ks := range s.keys {
		if ks.holder != nil && strings.HasPrefix(k, prefix) && k > cursor {
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
