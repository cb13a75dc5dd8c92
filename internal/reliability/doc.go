// Package reliability runs locker's backends through faults: randomized
// histories (package history) recorded while a Nemesis breaks the real
// servers that package testenv starts, checked against the fenced-mutex
// model, in a short mode for CI and a soak for the figures in
// docs/reliability.md.
//
// # Deployments
//
// A Deployment is one backend on its servers — memory; Redis, single and
// under a sentinel with a replica; Redlock over 5 masters; etcd, single, a
// 3-member cluster, and one whose peers talk through proxies (-linked);
// ZooKeeper, standalone, a 3-server ensemble, and a linked one; PostgreSQL,
// single and a primary with a streaming standby (-failover; its clients,
// like the sentinel's, follow the primary without proxies)
// — with a toxiproxy per client slot and server (Slots of them), so that
// the client↔server path of one client can be broken while the others go
// on. Each client of a run dials through the next slot. The etcd and
// ZooKeeper servers keep their data on slow disks (internal/slowdisk), and
// the Redis, Redlock, standalone ZooKeeper and single PostgreSQL servers
// run with a clock the faults move (testenv.Clock).
//
// # Faults
//
// Each deployment lists the faults it can suffer (Deployment.Faults):
//
//   - client blackhole, reset, latency (TTL/4 added to every answer),
//     replies dropped and requests dropped (one-way), on one client's
//     proxies;
//   - server pause (docker pause), kill with a restart delayed past the TTL,
//     and kill with an immediate restart, for single servers; a disk stall
//     (etcd, ZooKeeper); the server's clock stepped ahead or back (Redis,
//     ZooKeeper, PostgreSQL), and for PostgreSQL stepped back before a
//     crash, the restart two TTLs later;
//   - for Redlock: 2 or 3 of the 5 masters paused, one client cut from 2 or
//     3 of them, 2 of them killed and restarted after the TTL or at once,
//     one master's clock stepped ahead or back, or running at a skewed
//     rate (1 % fast and another 1 % slow; twice as fast);
//   - for the etcd cluster and the ZooKeeper ensemble: one client cut off,
//     a follower, the leader, or a majority (the leader and a follower)
//     partitioned from the others (docker network disconnect), the leader
//     paused, the leader killed and restarted, the leader's disk stalled,
//     a follower or the leader replaced by a fresh member (its client
//     proxies retargeted to the new address);
//   - for the linked clusters: the leader or a follower isolated with its
//     packets dropped and its connections left open, and (etcd) the leader
//     and its followers cut one way;
//   - for the sentinel: the master frozen until the replica is promoted;
//   - for the PostgreSQL pair: the primary killed and the standby
//     promoted, healed by rebuilding the killed server as a standby of the
//     new primary (testenv.PostgresPair.Rebuild).
//
// A Nemesis injects one fault again and again during a run — a quiet spell
// of about TTL/2, the fault for about 1.5×TTL, healed — records each fault's
// window, and heals everything before the run's liveness check, which must
// acquire every key again within the deployment's Liveness bound.
//
// A fault outside a backend's stated guarantee (a Redis or Redlock master
// restarted at once without persistence, forgetting held locks; a clock
// stepped ahead; a failover) carries the
// reason in Fault.Outside. Its runs are judged by the weaker properties the
// backend does claim — tokens unique and increasing, the fence's order,
// exclusive writes and no lost update through the fenced resource, and
// liveness — while its mutual-exclusion violations are counted apart
// (Judge).
//
// # Running
//
// go test ./internal/reliability runs the short mode: every deployment
// under every fault of its catalogue, one bounded history each; and
// elections (RunOptions.Elections), and N-permit locks where the backend
// has them (Deployment.Permits), under the deployment's TellingFault
// (memory: without faults). TestSoak, with -soak=DURATION, runs the soak
// and prints its table (of elections, with -soak.elections); see
// docs/reliability.md for the command. The fuzz targets of this package
// fuzz every backend's URL parsing through locker.Open, and each backend's
// key encoding through a live server.
package reliability
