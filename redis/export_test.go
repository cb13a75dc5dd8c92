package redis

import "time"

// AcquireScript is acquire.lua as the package runs it.
var AcquireScript = acquireScript

// CloseClients is the option Open gives its Lockers, for tests that make
// their own clients and want Close to close them.
var CloseClients = closeClients

// DefaultNodeTimeout is Redlock's per-master timeout for ttl when
// WithNodeTimeout does not set one.
func DefaultNodeTimeout(ttl time.Duration) time.Duration { return (&redlock{}).timeout(ttl) }

// PermitScript is the N-permit acquire script as the package runs it.
var PermitScript = permitScript

// ReleaseScript is release.lua as the package runs it: a test can tell its
// requests on the wire by the script's hash.
var ReleaseScript = releaseScript
