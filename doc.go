// Package locker is a distributed lock with fencing tokens: one Locker
// interface over Redis (SET NX, and Redlock over several masters), etcd,
// ZooKeeper, PostgreSQL, and an in-process backend, package memory.
//
// A backend is chosen at construction — each backend package has one
// constructor, New(client, options…), over the engine's own client, which
// stays the caller's — or by a URL with Open once its package is imported:
//
//	memory://[name]                     package memory
//	redis://host:6379/0, redlock://…    package redis
//	etcd://h1:2379,h2:2379/prefix       package etcd
//	zookeeper://h1:2181,h2:2181/root    package zookeeper
//	postgres://user@host/db?table=…     package postgres
//
// Options (WithTTL, WithAutoRefresh, WithOwner, WithNamespace, WithLogger
// and each backend's own) go in one list; each URL query parameter is the
// option of the same name. Locker-wide options given to one call are
// refused with ErrInvalidOption.
//
// Acquire and TryAcquire return a Lease, which refreshes itself until it is
// released, lost or its Locker closed (WithAutoRefresh(false) opts out: the
// lease then ends at its Deadline unless refreshed). Done is closed when the
// lease ends for any reason and Err says why. GrantedTTL is the TTL the
// backend really granted, rounded up, never down. Do wraps the pattern:
// acquire, run a function whose context ends with the lease, release.
//
// Every lease carries a fencing token (Lease.Token) that strictly increases
// per key across holder crashes, lease expiry, reconnects and each backend's
// stated server failures: send it with every write, and let the resource
// refuse tokens lower than one it has seen (package fencing). Only that makes
// a lock safe against a holder paused past its TTL.
//
// A key is valid UTF-8 of 1 to MaxKeyLen bytes without NUL (else
// ErrInvalidKey); distinct keys never collide, nest or inject in any backend.
// Errors match ErrLocked, ErrLeaseLost, ErrReleased, ErrClosed,
// ErrInvalidKey, ErrInvalidOption, ErrInvalidURL or ErrUnavailable (never
// confused with ErrLocked) with errors.Is, and name the backend, operation
// and key; a caller's ended context is reported as its own error. Nothing is
// logged unless WithLogger is given. Backends implement package driver;
// README.md compares what each one promises.
package locker
