package postgres_test

import (
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness(t, testenv.PostgresDB(t)))
}

// TestConformanceAdvisory runs the suite against the advisory mode: many
// locks on each of a few shared connections.
func TestConformanceAdvisory(t *testing.T) {
	h := newHarness(t, testenv.PostgresDB(t))
	h.opts = []locker.Option{postgres.WithMode(postgres.Advisory)}
	conformance.Run(t, h)
}
