package postgres_test

import (
	"testing"

	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/testenv"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness(t, testenv.PostgresDB(t)))
}
