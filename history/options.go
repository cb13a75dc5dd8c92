package history

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// NewLocker returns a new, independent client of the lock service under
// test: its own connections, so that clients fail independently. The run
// closes every Locker it is given.
type NewLocker func(ctx context.Context) (locker.Locker, error)

// Defaults of Options. They make a short run that suits a unit test of an
// in-process backend; networked backends want a longer TTL.
const (
	DefaultClients      = 4
	DefaultKeys         = 2
	DefaultOps          = 150
	DefaultDuration     = 1500 * time.Millisecond
	DefaultTTL          = 150 * time.Millisecond
	DefaultPauseRate    = 0.25
	DefaultCheckTimeout = 20 * time.Second
)

// Options shape a run. The zero value of every field means its default.
type Options struct {
	// Clients is how many Lockers run operations concurrently.
	Clients int
	// Keys is how many keys they contend for. The key names are fresh for
	// every run and include characters that backends must encode ("a",
	// "a/b", quotes, "%", SQL and Lua metacharacters), so that a backend
	// that lets two of them collide fails the checks.
	Keys int
	// Ops bounds the operations of each client.
	Ops int
	// Duration bounds the time in which clients start new operations; a
	// lease being held when it passes is finished off, which takes at most
	// about two TTLs more.
	Duration time.Duration
	// TTL is the lease TTL. Pauses sleep past it.
	TTL time.Duration
	// OpTimeout bounds each call other than a blocking acquire (default
	// the TTL, at least 100 ms). A call that runs out of it is ambiguous.
	OpTimeout time.Duration
	// PauseRate is the share of holds that end in a pause: the holder stops
	// refreshing, sleeps past its TTL, then writes and releases anyway.
	// Negative means none.
	PauseRate float64
	// Seed seeds the clients' random choices; 0 picks one from the clock.
	// Result.Seed reports it. Scheduling still varies from run to run.
	Seed uint64
	// Guard admits the writes to the fenced resource (default a new
	// fencing.Memory). A guard kept in a store must start empty for the
	// run's fresh key names, which it does when it is keyed by resource.
	Guard fencing.Guard
	// Nemesis, if set, injects faults while the clients run.
	Nemesis Nemesis
	// Liveness bounds how long after the run (and the nemesis's healing)
	// every key must be acquirable again (default 2×TTL + 1 s). Negative
	// skips the liveness check.
	Liveness time.Duration
	// CheckTimeout bounds the linearizability check of each key's history.
	// A check that runs out of it counts as unknown, never as passed.
	CheckTimeout time.Duration
	// Limit, above 1, makes every key an N-permit lock (locker.WithLimit):
	// the model then allows up to Limit holders at once (at most MaxLimit),
	// and holders make no writes (a fence that keeps the largest token
	// does not fit concurrent holders). Default 1, a lock.
	Limit int
	// Elections makes the clients candidates of elections instead of
	// holders of locks: each key is an election (package election), each
	// client campaigns on a fresh Election, leads for a while with a term
	// that refreshes itself, writes through the fenced resource with the
	// term's token, sometimes pauses past the TTL before its last write,
	// and resigns; the liveness check campaigns. The checks are the same
	// (docs/design/election.md says why the model stays sound). Needs
	// Limit 1; LockerOptions do not apply (a term is the election's).
	Elections bool
	// LockerOptions are given to every acquisition (WithTTL is added, and
	// automatic refresh is off unless they turn it on: clients refresh as
	// operations of the history).
	LockerOptions []locker.Option
}

func (o Options) withDefaults() (Options, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Clients, DefaultClients)
	def(&o.Limit, 1)
	def(&o.Keys, DefaultKeys)
	def(&o.Ops, DefaultOps)
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = max(o.TTL, 100*time.Millisecond)
	}
	if o.PauseRate == 0 {
		o.PauseRate = DefaultPauseRate
	}
	if o.Guard == nil {
		o.Guard = fencing.NewMemory()
	}
	if o.Liveness == 0 {
		o.Liveness = 2*o.TTL + time.Second
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = DefaultCheckTimeout
	}
	switch {
	case o.Clients < 1, o.Keys < 1, o.Ops < 1:
		return o, fmt.Errorf("history: Clients, Keys and Ops must be positive (got %d, %d, %d)", o.Clients, o.Keys, o.Ops)
	case o.Elections && o.Limit > 1:
		return o, fmt.Errorf("history: Elections needs Limit 1 (got %d)", o.Limit)
	case o.Limit < 1 || o.Limit > MaxLimit:
		return o, fmt.Errorf("history: Limit must be 1 to %d (got %d)", MaxLimit, o.Limit)
	case o.Duration < 0, o.TTL < locker.MinTTL, o.OpTimeout < 0, o.CheckTimeout < 0:
		return o, fmt.Errorf("history: Duration, OpTimeout and CheckTimeout must be positive and TTL at least %v", locker.MinTTL)
	}
	return o, nil
}

// A Nemesis injects faults into the lock service while a run's clients are
// running: a server paused or killed, a client cut off, a partition.
// Package history defines only this hook; the nemeses live with the test
// servers they break.
type Nemesis interface {
	// Run injects faults until ctx is done, recording each fault's window
	// with faults.Begin, and heals every fault before it returns. The run
	// waits for it, then checks that every key is acquirable again.
	Run(ctx context.Context, faults *Faults) error
}

// Faults records fault windows for the result and the visualisation.
type Faults struct {
	start time.Time
	mu    sync.Mutex
	list  []Window
}

// Window is a span of a run: a fault injected by a nemesis, or a client's
// pause.
type Window struct {
	Name       string // what happened, e.g. "partition leader" or "pause"
	Client     int    // the client paused; -1 for faults of the service
	Start, End time.Duration
}

// Begin records that the fault name starts now; calling the returned
// function records its end (once; later calls do nothing).
func (f *Faults) Begin(name string) (end func()) {
	return f.begin(name, -1)
}

func (f *Faults) begin(name string, client int) func() {
	start := time.Since(f.start)
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.list = append(f.list, Window{Name: name, Client: client, Start: start, End: time.Since(f.start)})
		})
	}
}

func (f *Faults) windows() []Window {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Window(nil), f.list...)
}
