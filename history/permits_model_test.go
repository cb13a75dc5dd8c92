package history

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The permits model on hand-made histories of a key that admits two
// holders.
func TestPermitsModel(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"TwoHolders_Legal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 100),
			o(1, TryAcquire, OK, 2, 20, 30, 120),
			o(2, TryAcquire, Locked, 0, 40, 50, 0),
			o(0, Release, OK, 1, 60, 61, 0),
			o(2, TryAcquire, OK, 3, 70, 80, 180),
			o(1, Release, OK, 2, 90, 91, 0),
			o(2, Release, OK, 3, 92, 93, 0),
		}, porcupine.Ok},
		{"ThirdHolderInsideBothDeadlines_Illegal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 100),
			o(1, TryAcquire, OK, 2, 20, 30, 120),
			o(2, TryAcquire, OK, 3, 40, 50, 150),
		}, porcupine.Illegal},
		{"ThirdHolderAfterOneDeadline_Legal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 100),
			o(1, TryAcquire, OK, 2, 20, 30, 300),
			o(2, Acquire, OK, 3, 40, 150, 250), // the first permit expired
			o(0, Release, Lost, 1, 160, 161, 0),
		}, porcupine.Ok},
		{"LockedWithAPermitFree_Illegal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 100),
			o(1, TryAcquire, Locked, 0, 20, 30, 0),
		}, porcupine.Illegal},
		{"TokenBackwardsAcrossPermits_Illegal", []Op{
			o(0, TryAcquire, OK, 5, 0, 10, 100),
			o(1, TryAcquire, OK, 4, 20, 30, 120),
		}, porcupine.Illegal},
		// A failed refresh ends its permit's lease, whose lock the portable
		// layer releases at once: a third holder may come before Ended is
		// recorded (as in the one-holder model's case of that name).
		{"FailedRefreshEndsLease_GrantBeforeEndedRecorded_Legal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 300),
			o(1, TryAcquire, OK, 2, 20, 30, 300),
			o(0, Refresh, Ambiguous, 1, 40, 45, 0),
			o(2, TryAcquire, OK, 3, 42, 50, 350),
			{Client: 0, Key: "k", Kind: Ended, Outcome: Lost, Token: 1, Lease: 1, Call: 60 * time.Millisecond, Return: 60 * time.Millisecond},
		}, porcupine.Ok},
		{"RefreshOfAPermitNotHeld_Illegal", []Op{
			o(0, TryAcquire, OK, 1, 0, 10, 100),
			o(0, Release, OK, 1, 11, 12, 0),
			o(0, Refresh, OK, 1, 13, 14, 200),
		}, porcupine.Illegal},
	}
	m := permitsModel(2)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := checkKey(m, c.ops, 5*time.Second); got != c.want {
				t.Fatalf("permits model: %s, want %s", got, c.want)
			}
		})
	}
}
