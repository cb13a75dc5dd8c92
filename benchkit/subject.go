package benchkit

import (
	"context"
	"errors"

	"github.com/distlock/locker"
)

// Release ends a hold taken by [Mutex.Lock].
type Release func(ctx context.Context) error

// A Mutex is one lock implementation as the workloads see it. Lock blocks
// until key is held or ctx ends. A Mutex is used by many goroutines at once;
// it decides itself how they share connections or sessions.
type Mutex interface {
	Lock(ctx context.Context, key string) (Release, error)
}

// Role says what a subject is within its group.
type Role string

// The roles, in the order report tables list them.
const (
	RoleFloor Role = "floor" // bare round trips of the group's protocol; not a lock
	RoleOurs  Role = "ours"  // a locker backend
	RolePeer  Role = "peer"  // another library, on the same server
)

// A Subject is one thing measured.
type Subject struct {
	// Name labels the subject's rows: "locker redis://127.0.0.1:6379",
	// "redsync", "floor 2×PING".
	Name string `json:"name"`
	// Group is the server or deployment the subject runs against; ratios
	// are taken between subjects of one group.
	Group string `json:"group"`
	Role  Role   `json:"role"`
	// Floor describes, for a floor, the round trips it makes.
	Floor string `json:"floor,omitempty"`

	Mutex Mutex `json:"-"`
	// Locker is set for our backends: the flash sale needs fencing tokens,
	// which only they give.
	Locker locker.Locker `json:"-"`
	// Others are further Lockers of the same backend, each with clients
	// of its own, as other processes would have (see AddLockers); the
	// semaphore workload spreads its contenders over Locker and these.
	Others []locker.Locker `json:"-"`
	// Close releases the subject's clients; nil if there is nothing to close.
	Close func() error `json:"-"`

	// opts are the options every acquisition of Locker passes.
	opts []locker.Option
}

// exclusive reports whether the subject is a lock (floors are not).
func (s *Subject) exclusive() bool { return s.Role != RoleFloor }

// LockerMutex adapts a locker.Locker to a Mutex: Acquire with the given
// options, Release.
func LockerMutex(l locker.Locker, opts ...locker.Option) Mutex {
	return lockerMutex{l, opts}
}

type lockerMutex struct {
	l    locker.Locker
	opts []locker.Option
}

func (m lockerMutex) Lock(ctx context.Context, key string) (Release, error) {
	lease, err := m.l.Acquire(ctx, key, m.opts...)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// Ours makes the subject of a locker backend.
func Ours(name, group string, l locker.Locker, opts ...locker.Option) *Subject {
	return &Subject{Name: name, Group: group, Role: RoleOurs, Mutex: LockerMutex(l, opts...), Locker: l, Close: l.Close, opts: opts}
}

// AddLockers adds further Lockers of the subject's backend to Others;
// Close closes them too.
func (s *Subject) AddLockers(ls ...locker.Locker) {
	s.Others = append(s.Others, ls...)
	prev := s.Close
	s.Close = func() error {
		var errs []error
		if prev != nil {
			errs = append(errs, prev())
		}
		for _, l := range ls {
			errs = append(errs, l.Close())
		}
		return errors.Join(errs...)
	}
}
