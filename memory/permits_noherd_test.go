package memory_test

import "github.com/distlock/locker/memory"

// Wakeups implements conformance.WakeCounter: the suite's no-herd subtest
// counts the waiters a release wakes.
func (h *harness) Wakeups() int64 { return memory.Wakeups() }
