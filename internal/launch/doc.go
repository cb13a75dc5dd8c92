// Package launch starts the servers locker is tested and benchmarked
// against — Redis, etcd, ZooKeeper and PostgreSQL — as Docker containers of
// the images package testimages names, and removes them. It is the one
// launcher behind two front ends: internal/testenv (the tests: skip-or-fail
// policy, t.Cleanup, fault injection) and benchkit/servers (lockctl bench
// --servers and the bench module). It knows nothing of package testing:
// every call takes a context and returns an error.
//
// What both front ends need is here once:
//
//   - the server specs: image, command line, configuration files (zoo.cfg,
//     pg_hba.conf) written by the container's own shell, published ports
//     ([Redis], [Etcd], [ZooKeeper], [Postgres]; [Combine] runs several in
//     one container);
//   - the port policy ([FreePort]);
//   - the readiness probes, which also report each server's version;
//   - the labels, the watchdog and the removal of leftovers.
//
// # Addresses
//
// Each server listens in its container on a port chosen before it starts
// and published on 127.0.0.1 under the same number. Servers that announce
// their address to clients (etcd's advertise-client-urls, Redis Cluster's
// MOVED replies) can then announce the address the client dials, and a
// server restarted after a kill comes back on the same address. The ports
// come from below the kernel's ephemeral range, where outgoing connections
// take their local ports and could take a killed server's port before it
// restarts.
//
// # Cleanup
//
// Every container and network carries the label org.distlock.locker.test=1
// and the id and start time of the process that made it. A watchdog process
// (this same binary started again) removes what its parent
// leaves when the parent dies without cleaning up — a panic, a -timeout, a
// SIGKILL — and [Connect] removes leftovers of dead processes. Containers of
// live processes, such as other test binaries running in parallel, are
// never touched.
package launch
