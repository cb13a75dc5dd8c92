// Package testenv starts the real servers locker's tests run against —
// Redis, etcd, ZooKeeper and PostgreSQL, single and clustered — in Docker
// containers, and injects faults into them. It is the tests' front end of
// package launch, which starts the servers (their specs, ports, readiness
// probes, labels and clean-up) for lockctl bench --servers too; testenv adds
// the skip-or-fail policy, sharing and t.Cleanup, and the faults.
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
// below).
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
// t.Cleanup of the test that made them. What a test process leaves when it
// dies without cleaning up (a panic, a -timeout, a SIGKILL) is removed by
// package launch's watchdog, or by the next process that uses Docker;
// another live process's containers are never touched.
//
// # Addresses
//
// Each server is published on 127.0.0.1 under the port it listens on, chosen
// below the ephemeral range (see package launch), so that servers can
// announce the address the test process dials (etcd's advertise-client-urls,
// Redis Cluster's MOVED replies), and a server restarted after Kill comes
// back on the same address, so clients configured with it reconnect as they
// would to a restarted production server.
package testenv
