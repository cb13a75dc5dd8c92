// Package benchkit is the workload engine behind `lockctl bench` and the
// peer-library comparison in the bench/ module: the workloads (uncontended
// acquire+release, handoff between W waiters on one key, many keys, the
// flash sale, a semaphore of N permits), the interleaving of subjects round by round, and the outputs
// (terminal table, report.md, results.json, SVG and PNG charts). The cost
// curves ([Scale]: held leases, waiters, Lockers) run apart, per backend.
//
// It is not part of locker's API: it exists so that lockctl and the separate
// bench module run the same code, and it may change in any release without
// notice. Importing package locker does not import it.
//
// # Subjects
//
// Everything measured is a [Subject]: a [Mutex] (lock a key, get a release
// function) with a name, the Group it belongs to (the server or deployment it
// runs against: "redis", "redlock", "etcd", "zookeeper", "postgres") and a
// Role: the raw floor of that group, our backend, or a peer library. Ratios
// are taken within a group: ours / floor, ours / peer.
//
// A floor is not a lock: its "lock" and "release" are the bare round trips
// the group's protocol needs (see package floor), so it runs the uncontended
// and many-keys workloads but not the contended ones.
//
// The semaphore workload spreads its contenders over the subject's Locker
// and its Others (see [Subject.AddLockers]): separate clients, as separate
// processes would have.
//
// # Interleaving
//
// Each workload runs Rounds times; within a round every subject runs once,
// in order (A B C A B C …), so drift in the load of a shared machine hits
// every subject alike. Before its first timed run each subject runs the
// workload once, small and untimed, to open connections and sessions.
package benchkit
