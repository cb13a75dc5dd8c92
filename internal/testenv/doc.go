// Package testenv starts the real servers locker's tests run against —
// Redis, etcd, ZooKeeper and PostgreSQL, single and clustered — in Docker
// containers through testcontainers-go, and injects faults into them.
//
// # Images
//
// Our machines reach no container registry, so the images are built locally
// by scripts/test-images (a Debian root filesystem from debootstrap, plus a
// static etcd 3.6 in an image FROM scratch). The image tags carry a hash of
// their inputs; testenv asks the script for them (--print-tags) and runs the
// script itself when an image is missing, so `go test ./...` needs no manual
// step on a machine with Docker and root. LOCKER_TEST_SERVER_IMAGE and
// LOCKER_TEST_ETCD_IMAGE name other images (built from the Dockerfiles in
// images/ by users who can reach a registry).
//
// LOCKER_TEST_NO_DOCKER=1 makes testenv behave as if there were no Docker
// engine (to check the skip-or-fail policy, or to use only the variables
// below). LOCKER_TESTENV_VERBOSE=1 turns testcontainers' own log back on.
//
// # Already-running servers
//
// These variables point tests at servers started by someone else (a CI's
// service containers, say); then no container is started for that server:
//
//	LOCKER_TEST_REDIS_ADDR      host:port
//	LOCKER_TEST_ETCD_ENDPOINTS  comma-separated host:port (Addr is the first)
//	LOCKER_TEST_ETCD34_ENDPOINTS  the same, for Etcd34
//	LOCKER_TEST_ZOOKEEPER_ADDR  host:port
//	LOCKER_TEST_POSTGRES_DSN    postgres://… URL
//
// Fault injection other than Proxy, and clusters, need containers: with such a
// variable set they skip, saying why.
//
// # Skip or fail
//
// When a server is neither reachable through Docker nor named by a variable,
// the test skips with a message saying how to run it — unless the CI
// variable is non-empty: then it fails, because a backend silently skipped in
// CI is a backend not tested.
//
// # Cleanup
//
// Shared single servers are removed by [Main] after the tests; clusters by
// t.Cleanup of the test that made them. Every container and network carries
// the label org.distlock.locker.test=1 and the id of the process that made
// it. A watchdog process, started with the first container, removes what its
// test process leaves when that process dies without cleaning up (a panic, a
// -timeout, a SIGKILL); and leftovers of dead processes are removed when the
// next test process first uses Docker. Ryuk, testcontainers' own reaper, is
// disabled because its image cannot be pulled here.
//
// # Addresses
//
// Each server listens in its container on a port chosen before it starts and
// published on 127.0.0.1 under the same number. Servers that announce their
// address to clients (etcd's advertise-client-urls, Redis Cluster's MOVED
// replies) can then announce the address the test process dials, and a
// server restarted after Kill comes back on the same address, so clients
// configured with it reconnect as they would to a restarted production server.
package testenv
