package reliability_test

import (
	"testing"

	"github.com/distlock/locker/internal/testenv"
)

// testenv.Main removes the shared servers after the tests. Goroutine leaks
// are checked per run (in check): toxiproxy and the Docker client keep
// goroutines of their own for the life of the process.
func TestMain(m *testing.M) { testenv.Main(m) }
