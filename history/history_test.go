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
