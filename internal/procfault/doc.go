// Package procfault puts a lock holder's whole process through faults the
// operating system makes: the holder (command holder, built by the tests
// with go build) is stopped with SIGSTOP past its TTL and resumed, and
// killed with SIGKILL while its acquire, refresh or release is in flight —
// held in a toxiproxy (testenv.Proxy.DelayRequests), so that the request
// reaches the server after its sender is dead.
//
// TestProcessFaults, a subtest per backend on real servers (redis, Redlock
// over 3 masters, etcd, zookeeper, postgres), checks what each backend's
// package doc states:
//
//   - a stopped holder loses the key within the backend's bound (Redis and
//     Redlock: the TTL; etcd: T+R, the lease; ZooKeeper: the session
//     timeout; PostgreSQL: the TTL, idle_in_transaction_session_timeout);
//     another Locker then gets a larger token and writes through the
//     backend's fencing guard; the resumed holder reports the loss, its
//     late write is refused by the guard, and its release touches nothing;
//   - a killed holder's key is acquirable again within the same bound after
//     its last request landed, with a larger token, and nothing of it stays
//     (no holder, no waiter once the next holder released).
//
// memory is left out by design: its locks live in one process's memory,
// so a second process cannot share them, and a killed process takes its
// locks with it.
//
// OpenResource is the fenced resource both processes write to: a value in
// the backend's own store behind its guard (redis.Guard, etcd.Guard,
// zookeeper.Guard, postgres.Guard).
package procfault
