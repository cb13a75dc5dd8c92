package memory

import "sync/atomic"

// wakeups counts the wake-ups of waiting Acquires (each a permit or the
// lock handed over): what the no-herd test measures (export_test.go).
var wakeups atomic.Int64
