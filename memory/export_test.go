package memory

import "github.com/distlock/locker"

// NewKillable returns a Locker over store and a function that kills its
// client: every later call fails as if the connection were gone, and the
// locks it held stay on the store until their TTL.
func NewKillable(store *Store, opts ...locker.Option) (locker.Locker, func(), error) {
	b := newBackend(store)
	l, err := locker.New(b, opts...)
	return l, func() { b.dead.Store(true) }, err
}

// Pending reports how many keys the store keeps state for.
func (s *Store) Pending() int { return s.pending() }

// Wakeups reports how many waiting Acquires of this process have been
// woken.
func Wakeups() int64 { return wakeups.Load() }
