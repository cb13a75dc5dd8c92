package history_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
	"github.com/distlock/locker/memory"
)

// electionOpts make a short election run: terms last a few TTLs, so every
// term refreshes itself several times.
func electionOpts(seed uint64) history.Options {
	return history.Options{Elections: true, Seed: seed, TTL: 200 * time.Millisecond, Duration: 2 * time.Second,
		CheckTimeout: 10 * time.Second}
}

// Sound elections pass, on the memory reference backend and on the toy
// service, and their terms refreshed themselves while they led: the run
// observed refreshes, wrote, and campaigned again after resignations.
func TestElections_Sound(t *testing.T) {
	for name, mk := range map[string]history.NewLocker{
		"memory": func() history.NewLocker {
			store := memory.NewStore()
			return func(context.Context) (locker.Locker, error) { return memory.New(store) }
		}(),
		"toy":                  newToy(sound).newLocker,
		"toy under reply loss": nil,
	} {
		t.Run(name, func(t *testing.T) {
			opts := electionOpts(7)
			if mk == nil {
				s := newToy(sound)
				mk, opts.Nemesis = s.newLocker, replyLoss(s, opts.TTL)
			}
			res := history.Check(t, mk, opts)
			if res == nil {
				return
			}
			var refreshes, campaigns, resigned int
			for _, op := range res.Ops {
				switch {
				case op.Kind == history.Refresh && op.Outcome == history.OK:
					refreshes++
				case op.Kind == history.Acquire && op.Outcome == history.OK:
					campaigns++
				case op.Kind == history.Release && op.Outcome == history.OK:
					resigned++
				}
			}
			if refreshes == 0 || campaigns < 4 || resigned == 0 || res.Counts.Writes == 0 {
				t.Errorf("the run did not exercise elections: %d refreshes seen, %d terms, %d resignations, %d writes",
					refreshes, campaigns, resigned, res.Counts.Writes)
			}
		})
	}
}

// TestElections_Teeth: broken elections — built over a lock service whose
// tokens do not increase, or whose Campaign grants while another term
// holds — and a guard that admits stale tokens are each reported.
func TestElections_Teeth(t *testing.T) {
	cases := []struct {
		name  string
		flaw  flaw
		guard bool
		want  []history.CheckName
	}{
		{"RepeatTokens", flawRepeatTokens, false, []history.CheckName{history.CheckLinearizable, history.CheckTokens}},
		{"BackwardsTokens", flawBackwardsTokens, false, []history.CheckName{history.CheckLinearizable, history.CheckTokens}},
		// Two leaders at once, both within their self-refreshed terms.
		{"CampaignGrantsWhileHeld", flawIgnoreHeld, false, []history.CheckName{history.CheckLinearizable}},
		{"CampaignGrantsWhileHeldNoFence", flawIgnoreHeld, true, []history.CheckName{history.CheckExclusive, history.CheckLostUpdate}},
		// The service expires terms a TTL after their grant while their
		// refreshes report success: the next leader is granted inside the
		// deadline the last refresh promised. Only the refreshes the run
		// observes put that deadline in the model.
		{"RefreshDoesNotExtend", flawRefreshLies, false, []history.CheckName{history.CheckLinearizable}},
		// A leader paused past its TTL, its term lost to reply loss
		// meanwhile, writes after its successor.
		{"GuardAdmitsStaleToken", sound, true, []history.CheckName{history.CheckFenceOrder}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var caught []history.CheckName
			for attempt := range 3 {
				opts := electionOpts(uint64(200 + attempt))
				s := newToy(c.flaw)
				if c.guard {
					opts.Guard = admitAll{}
				}
				if c.flaw == sound {
					opts.PauseRate, opts.Nemesis = 0.8, replyLoss(s, opts.TTL)
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

// Elections are of one leader: a permits limit is refused before any run.
func TestElections_WithLimit_Refused(t *testing.T) {
	_, err := history.Run(t.Context(), newToy(sound).newLocker, history.Options{Elections: true, Limit: 2})
	if err == nil {
		t.Fatal("Run with Elections and Limit 2 ran")
	}
}
