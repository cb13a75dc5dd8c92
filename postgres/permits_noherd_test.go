package postgres_test

import "github.com/distlock/locker/postgres"

// Wakeups implements conformance.WakeCounter: the suite's no-herd subtest
// counts the looks for a free permit that a release causes.
func (h *harness) Wakeups() int64 { return postgres.Wakeups() }
