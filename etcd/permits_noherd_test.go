package etcd_test

import "github.com/distlock/locker/etcd"

// Wakeups implements conformance.WakeCounter: the suite's no-herd subtest
// counts the re-checks of waiters that a release causes.
func (h *harness) Wakeups() int64 { return etcd.Wakeups() }
