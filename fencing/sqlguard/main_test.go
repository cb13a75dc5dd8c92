package sqlguard_test

import (
	"testing"

	"github.com/distlock/locker/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
