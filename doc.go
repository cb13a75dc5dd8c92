// Package locker is a distributed lock with fencing tokens: one Locker
// interface over Redis (SET NX, and Redlock over several masters), etcd,
// ZooKeeper, PostgreSQL, and an in-process backend, package memory.
//
// # Leases
//
// Acquire and TryAcquire return a Lease. A lease refreshes itself in the
// background until it is released, lost or its Locker closed; with
// WithAutoRefresh(false) it is valid until its Deadline — the moment the
// request that obtained or last refreshed it was sent, on the monotonic
// clock, plus the TTL, minus a drift margin (driver.DriftMargin) — unless the
// holder calls Refresh. GrantedTTL tells the TTL the backend really granted
// (rounded up, never down). Done is closed when the
// lease ends for any reason: released, deadline passed, reported lost by the
// backend, an ambiguous or failed refresh, or the Locker closed. Err then
// says which (ErrReleased or ErrLeaseLost wrapping the cause).
//
// Do wraps the whole pattern: acquire, refresh in the background, run a
// function with a context cancelled the moment the lease is lost, release.
//
// # Fencing
//
// A lock cannot stop a holder that was paused past its TTL from writing after
// the next holder took over. Every lease therefore carries a fencing token
// (Lease.Token) that strictly increases per key, across holder crashes, lease
// expiry, reconnects and each backend's stated server failures. Send it with
// every write; the resource refuses tokens lower than one it has seen
// (package fencing).
//
// # Backends
//
// A backend is chosen at construction — every backend package has one
// constructor, New(client, options…), over the engine's own client, which
// stays the caller's — or by a URL with Open, once its package is imported:
//
//	memory://[name]                     package memory
//	redis://host:6379/0, rediss://…     package redis
//	etcd://h1:2379,h2:2379/prefix       package etcd
//	zookeeper://h1:2181,h2:2181/root    package zookeeper
//	postgres://user@host/db?table=…     package postgres
//
// A backend's own settings are options too (redis.WithPrefix, …), given in
// the same list; each URL query parameter is the option of the same name.
// Options that configure a whole Locker (WithLogger, backend options) are
// refused with ErrInvalidOption when given to one call.
//
// Backends implement the small interface of package driver; everything
// common to them — validation, namespacing, deadlines, Done/Err, refresh
// loops, Do, error wrapping — is done once, here.
//
// # Keys
//
// A key is any valid UTF-8 string of 1 to MaxKeyLen bytes without NUL;
// anything else is ErrInvalidKey. Distinct keys are independent in every
// backend: "a" and "a/b", "..", keys with quotes, "%", Lua or SQL
// metacharacters never collide, nest or inject. WithNamespace gives a Locker
// a key space of its own.
//
// # Errors
//
// Errors match the sentinels of this package with errors.Is: ErrLocked,
// ErrLeaseLost, ErrReleased, ErrClosed, ErrInvalidKey, ErrInvalidOption,
// ErrInvalidURL and ErrUnavailable (the backend could not be reached or
// answered an error — never confused with ErrLocked). When the caller's
// context ends, its error (context.Canceled, context.DeadlineExceeded) is
// returned as such. Messages name the backend, the operation and the key:
//
//	redis: try-acquire "job1": locker: locked by another owner
//
// # Logging
//
// Locker logs nothing unless given a *slog.Logger with WithLogger.
package locker
