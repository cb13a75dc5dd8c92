package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
	"github.com/distlock/locker/memory"
	"go.uber.org/goleak"
)

// No goroutine of a run — clients, leases, porcupine's checkers — outlives
// the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func memoryLockers() history.NewLocker {
	store := memory.NewStore()
	return func(context.Context) (locker.Locker, error) { return memory.New(store) }
}

// The reference backend passes, over several seeds, with pauses making
// stale writes that the fence refuses.
func TestMemory_ShortRuns_NoViolations(t *testing.T) {
	var total history.Counts
	for _, seed := range []uint64{1, 2, 3} {
		res := history.Check(t, memoryLockers(), history.Options{Seed: seed, Keys: 3})
		if res != nil {
			total.Add(res.Counts)
		}
	}
	t.Logf("memory, 3 runs: %v", total)
	if total.Acquisitions < 30 || total.Writes < 30 {
		t.Errorf("runs too thin to prove anything: %v", total)
	}
	if total.StaleWritesRefused == 0 {
		t.Errorf("no pause made a stale write in 3 runs: the pause path is not exercised (%v)", total)
	}
}

// Contended counts the histories that three clients or more shared: every
// one when four clients share one key, none when two clients run.
func TestCounts_Contended(t *testing.T) {
	for _, c := range []struct{ clients, want int }{{4, 1}, {2, 0}} {
		res := history.Check(t, memoryLockers(), history.Options{Seed: 5, Clients: c.clients, Keys: 1, Duration: 300 * time.Millisecond})
		if res == nil {
			return
		}
		if res.Counts.Histories != 1 || res.Counts.Contended != c.want {
			t.Errorf("%d clients on one key: %v, %d contended, want 1 history, %d contended", c.clients, res.Counts, res.Counts.Contended, c.want)
		}
	}
}

// Open by URL, as a backend's test would.
func TestMemory_ByURL(t *testing.T) {
	newLocker := func(ctx context.Context) (locker.Locker, error) {
		return locker.Open(ctx, "memory://history-by-url")
	}
	history.Check(t, newLocker, history.Options{Clients: 3, Duration: 500 * time.Millisecond})
}

// Under a nemesis that loses requests and replies, the outcomes the
// clients cannot know are recorded as ambiguous and not guessed: a sound
// service still passes, and every key is acquirable once it heals.
func TestToy_ReplyLossNemesis_AmbiguousButNoViolations(t *testing.T) {
	s := newToy(sound)
	opts := history.Options{Seed: 11, Nemesis: replyLoss(s, history.DefaultTTL)}
	res := history.Check(t, s.newLocker, opts)
	if res == nil {
		return
	}
	faults := 0
	for _, w := range res.Windows {
		if w.Client < 0 {
			faults++
		}
	}
	if faults == 0 || res.Counts.Ambiguous == 0 {
		t.Errorf("the nemesis made %d faults and %d ambiguous operations; want some of each", faults, res.Counts.Ambiguous)
	}
}

// TestRun_DurationCountsFromTheClientsStart: the run's Duration bounds what
// its clients do, not how long their Lockers took to make. A loaded
// fresh-clone run (2026-12-03) spent most of a ZooKeeper run's Duration
// opening sessions: 6 operations, and the fault never injected.
func TestRun_DurationCountsFromTheClientsStart(t *testing.T) {
	const (
		duration = time.Second
		clients  = 3
	)
	store := memory.NewStore()
	slow := func(ctx context.Context) (locker.Locker, error) {
		time.Sleep(duration / 2) // all clients: longer than the run
		return memory.New(store)
	}
	res, err := history.Run(t.Context(), slow, history.Options{Clients: clients, Keys: 1, Ops: 1000, Duration: duration, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ops := 0 // the liveness check's client, made after them, is not one
	for _, op := range res.Ops {
		if op.Client < clients {
			ops++
		}
	}
	if ops == 0 {
		t.Fatalf("no client's operation recorded in a run of %v whose Lockers took %v to make", duration, clients*duration/2)
	}
}
