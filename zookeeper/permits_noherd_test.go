package zookeeper_test

import "github.com/distlock/locker/zookeeper"

// Wakeups implements conformance.WakeCounter: the suite's no-herd subtest
// counts the queue re-reads of waiters that a release causes.
func (h *harness) Wakeups() int64 { return zookeeper.Wakeups() }
