package history_test

import (
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
)

// The reference backend's N-permit locks pass the permits model, with
// eight clients contending for three permits of each key.
func TestMemory_Permits_NoViolations(t *testing.T) {
	var total history.Counts
	for _, seed := range []uint64{1, 2, 3} {
		res := history.Check(t, memoryLockers(), history.Options{Seed: seed, Clients: 8, Keys: 2, Limit: 3})
		if res != nil {
			total.Add(res.Counts)
		}
	}
	t.Logf("memory, 3 permit runs: %v", total)
	if total.Acquisitions < 30 {
		t.Errorf("runs too thin to prove anything: %v", total)
	}
}

// A service that admits one holder more than the model's limit — here the
// memory backend asked for three permits while the run checks two — is
// caught.
func TestTeeth_PermitsOverLimit(t *testing.T) {
	for attempt := range 3 {
		res, err := history.Run(t.Context(), memoryLockers(), history.Options{Seed: uint64(attempt + 1), Clients: 8, Keys: 1,
			Limit: 2, PauseRate: -1, LockerOptions: []locker.Option{locker.WithLimit(3)}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Caught(history.CheckLinearizable) {
			return
		}
		t.Logf("attempt %d: not caught: %v", attempt+1, res.Counts)
	}
	t.Fatal("three holders of a two-permit key went unreported in three runs")
}
