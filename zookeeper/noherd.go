package zookeeper

import "sync/atomic"

// wakeups counts the re-reads of the queue by waiting Acquires (contend):
// what the no-herd test measures (export_test.go).
var wakeups atomic.Int64
