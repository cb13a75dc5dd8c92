package etcd

import "sync/atomic"

// wakeups counts the re-checks of waiting Acquires (wait): what the
// no-herd test measures (export_test.go).
var wakeups atomic.Int64
