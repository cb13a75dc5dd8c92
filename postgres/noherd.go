package postgres

import "sync/atomic"

// wakeups counts the looks for a free permit (attemptPermit): an Acquire's
// first when it heads the key's queue, then one per wake-up. What the
// no-herd test measures (export_test.go).
var wakeups atomic.Int64
