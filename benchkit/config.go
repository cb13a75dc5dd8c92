package benchkit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distlock/locker"
)

// Config holds the sizes of a run.
type Config struct {
	// Workloads lists the kinds to run (Kind constants); empty means all.
	Workloads []string

	Ops      int   // uncontended: acquire+release pairs per run
	Waiters  []int // handoff: the numbers of waiters on one key
	Handoffs int   // handoff: handoffs timed per run

	ManyWorkers int // many keys: concurrent workers
	ManyKeys    int // many keys: distinct keys they pick from at random
	ManyOps     int // many keys: acquire+release pairs per run

	Permits       int           // semaphore: holders the key admits at once (locker.WithLimit)
	SemContenders int           // semaphore: goroutines contending for the permits of one key
	SemLockers    int           // semaphore: Lockers (clients) the contenders are spread over
	SemOps        int           // semaphore: permits granted per run
	SemHold       time.Duration // semaphore: how long each holder keeps its permit

	Buyers   int           // flash sale: concurrent buyers
	Stock    int           // flash sale: units in stock
	Pauses   int           // flash sale: holders that stall past their TTL
	PauseTTL time.Duration // flash sale: their lease TTL

	TTL    time.Duration // lease TTL of every other acquisition
	Rounds int           // timed runs of every workload per subject, interleaved
	// NoWarmup skips the untimed first run of each workload per subject.
	NoWarmup bool
	// RunTimeout bounds one run of one workload on one subject (0: 10
	// minutes): some clients (go-zookeeper) take no context, and a run
	// stuck in one must end the benchmark with an error, not hang it.
	RunTimeout time.Duration
	// Prefix keeps this run's keys apart from other runs' on shared
	// servers; NewConfig sets a random one.
	Prefix string
}

// DefaultWaiters are the contention levels of the handoff workload.
var DefaultWaiters = []int{1, 8, 32, 128}

// AllKinds lists the workload kinds in the order they run and print.
var AllKinds = []string{KindFlashSale, KindFlashSaleUnlocked, KindUncontended, KindHandoff, KindManyKeys, KindSemaphore}

// NewConfig returns the default sizes and a fresh key prefix.
func NewConfig() *Config {
	return &Config{
		Workloads: slices.Clone(AllKinds),
		Ops:       1000, Waiters: slices.Clone(DefaultWaiters), Handoffs: 200,
		ManyWorkers: 64, ManyKeys: 1000, ManyOps: 2000,
		Permits: 4, SemContenders: 64, SemLockers: 4, SemOps: 1000, SemHold: time.Millisecond,
		Buyers: 10000, Stock: 100, Pauses: 3, PauseTTL: 100 * time.Millisecond,
		TTL: locker.DefaultTTL, Rounds: 3, Prefix: RandomPrefix("bench"),
	}
}

// Quick shrinks c to a run of seconds: for CI and smoke tests.
// Explicit flags parsed after it still win.
func (c *Config) Quick() {
	c.Ops, c.Handoffs, c.Buyers, c.Stock, c.Pauses, c.Rounds = 30, 20, 500, 20, 1, 1
	c.ManyWorkers, c.ManyKeys, c.ManyOps = 16, 50, 100
	c.SemContenders, c.SemLockers, c.SemOps = 16, 2, 50
	c.Waiters = []int{1, 8}
}

// RandomPrefix returns name + "/" + 16 random hex digits + "/".
func RandomPrefix(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return name + "/" + hex.EncodeToString(b[:]) + "/"
}

// Validate reports the first size that makes no sense.
func (c *Config) Validate() error {
	for _, v := range []struct {
		name string
		n    int
		min  int
	}{
		{"buyers", c.Buyers, 1}, {"stock", c.Stock, 0}, {"pauses", c.Pauses, 0}, {"ops", c.Ops, 1},
		{"handoffs", c.Handoffs, 1}, {"many-workers", c.ManyWorkers, 1}, {"many-keys", c.ManyKeys, 1},
		{"many-ops", c.ManyOps, 1}, {"rounds", c.Rounds, 1},
		{"permits", c.Permits, 1}, {"sem-contenders", c.SemContenders, 1}, {"sem-lockers", c.SemLockers, 1}, {"sem-ops", c.SemOps, 1},
	} {
		if v.n < v.min {
			return fmt.Errorf("--%s %d: want at least %d", v.name, v.n, v.min)
		}
	}
	if len(c.Waiters) == 0 {
		return errors.New("--waiters: want at least one number of waiters")
	}
	for _, w := range c.Waiters {
		if w < 1 {
			return fmt.Errorf("--waiters %d: want at least 1", w)
		}
	}
	if c.TTL <= 0 || c.PauseTTL <= 0 {
		return errors.New("--ttl and --pause-ttl must be positive")
	}
	if c.SemHold < 0 {
		return errors.New("--sem-hold must not be negative")
	}
	for _, k := range c.Workloads {
		if !slices.Contains(AllKinds, k) && k != KindScale {
			return fmt.Errorf("--workloads: unknown workload %q (have %s, %s)", k, strings.Join(AllKinds, ", "), KindScale)
		}
	}
	if slices.Contains(c.Workloads, KindScale) && len(c.Workloads) > 1 {
		return fmt.Errorf("--workloads: %s runs alone", KindScale)
	}
	return nil
}

func (c *Config) runs(kind string) bool {
	return len(c.Workloads) == 0 || slices.Contains(c.Workloads, kind)
}
