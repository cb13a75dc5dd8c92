package history_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/history"
)

// admitAll is a broken guard: it admits every token, stale or not.
type admitAll struct{}

func (admitAll) Admit(context.Context, string, uint64) error { return nil }

// TestToy_Sound shows the toy service passes without flaws, so that the
// failures below are the flaws' doing.
func TestToy_Sound(t *testing.T) {
	history.Check(t, newToy(sound).newLocker, history.Options{Seed: 7})
}

// The toy passes under each nemesis that a flaw below needs, so that the
// failures are the flaws' doing, not the faults'.
func TestToy_SoundUnderNemeses(t *testing.T) {
	for name, nemesis := range map[string]func(*toy, time.Duration) toyFault{
		"follower cut off": staleFollower, "clock stepped back": clockStep, "failover": failover,
		"disk stall": diskStall,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newToy(sound)
			opts := history.Options{Seed: 7}
			underFault(&opts, nemesis(s, history.DefaultTTL))
			history.Check(t, s.newLocker, opts)
		})
	}
}

// underFault shapes a run of the toy under nemesis: one key, so that every
// hold has a successor waiting when the fault strikes; more pauses (the
// flaws show in a holder that outlives what the service knows); and twice
// the faults.
func underFault(opts *history.Options, nemesis toyFault) {
	opts.Keys, opts.PauseRate, opts.Duration = 1, 0.8, 2*history.DefaultDuration
	opts.Nemesis = nemesis
}

// TestTeeth runs the checker against deliberately broken backends and a
// broken guard; each must be reported, by the checks named here. A flaw
// shows only when the schedule provokes it (a pause, two clients racing),
// so each case may take up to three short runs.
func TestTeeth(t *testing.T) {
	cases := []struct {
		name    string
		flaw    flaw
		guard   bool // use the broken guard
		want    []history.CheckName
		nemesis func(*toy, time.Duration) toyFault // the fault the flaw needs, if any
	}{
		// Two acquisitions with one token: the model wants each token larger
		// than the last, the token check wants them distinct.
		{"RepeatTokens", flawRepeatTokens, false,
			[]history.CheckName{history.CheckLinearizable, history.CheckTokens}, nil},
		{"BackwardsTokens", flawBackwardsTokens, false,
			[]history.CheckName{history.CheckLinearizable, history.CheckTokens}, nil},
		// A paused holder's clean-up release deletes its successor's lock,
		// and a third client is granted it inside the successor's deadline.
		{"UnconditionalRelease", flawUnconditionalRelease, false,
			[]history.CheckName{history.CheckLinearizable}, nil},
		// The service expires a paused holder's lock after the TTL while its
		// lease still claims an hour: the next grant falls inside it.
		{"NeverExpiresLocally", flawLyingStart, false,
			[]history.CheckName{history.CheckLinearizable}, nil},
		// A second holder inside the first one's deadline.
		{"AcquireIgnoresHeldLock", flawIgnoreHeld, false,
			[]history.CheckName{history.CheckLinearizable}, nil},
		// ErrLocked on a free key, with no contender refused beside it
		// (the refusal a contender explains is allowed: see the model).
		{"RefusesAFreeLock", flawRefuseFree, false,
			[]history.CheckName{history.CheckLinearizable}, nil},
		// A sound lock and a guard that admits a paused holder's stale
		// write after its successor's: the resource's order shows it.
		{"GuardAdmitsStaleToken", sound, true,
			[]history.CheckName{history.CheckLinearizable, history.CheckFenceOrder}, nil},
		// No mutual exclusion and no fence: two holders' read-modify-writes
		// interleave and an acknowledged update is lost.
		{"NoExclusionNoFence", flawIgnoreHeld, true,
			[]history.CheckName{history.CheckExclusive, history.CheckLostUpdate}, nil},
		// A holder's refresh, answered by a follower cut off from its
		// leader, succeeds while the leader expires the lock and grants it:
		// the next holder falls inside the refreshed deadline.
		{"RefreshTrustsStaleRead", flawStaleRefresh, false,
			[]history.CheckName{history.CheckLinearizable}, staleFollower},
		// The service frees every lock when its stalled disk resumes: the
		// next holder falls inside the deadline of one that refreshed.
		{"StallFreesEveryLock", flawStallFreesAll, false,
			[]history.CheckName{history.CheckLinearizable}, diskStall},
		// The server's clock steps back and the tokens, read from it,
		// with it.
		{"TokensFromClockAlone", flawClockTokens, false,
			[]history.CheckName{history.CheckLinearizable, history.CheckTokens}, clockStep},
		// After a failover, a paused old holder's late release deletes the
		// current holder's lock, and a third client is granted it inside
		// the current holder's deadline.
		{"ReleaseIgnoresOwnerAfterFailover", flawFailoverRelease, false,
			[]history.CheckName{history.CheckLinearizable},
			func(s *toy, ttl time.Duration) toyFault { return failover(s, ttl/3) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var caught []history.CheckName
			for attempt := range 3 {
				opts := history.Options{Seed: uint64(100 + attempt), CheckTimeout: 10 * time.Second}
				if c.guard {
					opts.Guard = admitAll{}
				}
				s := newToy(c.flaw)
				if c.nemesis != nil {
					underFault(&opts, c.nemesis(s, history.DefaultTTL))
				}
				res, err := history.Run(t.Context(), s.newLocker, opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range res.Violations {
					if !slices.Contains(caught, v.Check) {
						caught = append(caught, v.Check)
					}
				}
				if len(res.UnknownKeys) > 0 {
					t.Errorf("attempt %d: %d checks ran out of time", attempt, len(res.UnknownKeys))
				}
				missing := slices.DeleteFunc(slices.Clone(c.want), func(w history.CheckName) bool { return slices.Contains(caught, w) })
				if len(missing) == 0 {
					t.Logf("caught after %d run(s) by %v; first violation:\n%v", attempt+1, caught, res.Violations[0])
					return
				}
			}
			t.Errorf("flaw %s not caught by %v (caught by %v)", c.name, c.want, caught)
		})
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
	logs   []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// Check fails the test on a violation, prints the failing history, and
// writes the visualisation where LOCKER_HISTORY_DIR says.
func TestCheck_Violation_FailsAndWritesVisualization(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(history.DirEnv, dir)
	rec := &recorder{TB: t}
	history.Check(rec, newToy(flawIgnoreHeld).newLocker, history.Options{Duration: 500 * time.Millisecond})
	if len(rec.errors) == 0 {
		t.Fatal("Check passed a backend whose acquire ignores a held lock")
	}
	if !strings.Contains(rec.errors[0], "linearizable violated") || !strings.Contains(rec.errors[0], "acquire") {
		t.Errorf("failure does not show the failing history:\n%s", rec.errors[0])
	}
	files, _ := filepath.Glob(filepath.Join(dir, "history-*-illegal-*.html"))
	if len(files) != 1 {
		t.Fatalf("visualisation files in %s: %v, want one", dir, files)
	}
	html, err := os.ReadFile(files[0])
	if err != nil || !bytes.Contains(html, []byte("acquire")) {
		t.Errorf("visualisation %s unreadable or without the history (%v)", files[0], err)
	}
	if !slices.ContainsFunc(rec.logs, func(s string) bool { return strings.Contains(s, files[0]) }) {
		t.Errorf("the visualisation's path was not logged: %q", rec.logs)
	}
}
