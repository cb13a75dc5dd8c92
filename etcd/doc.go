// Package etcd is the etcd backend of locker: one key per waiter on a lease
// the Locker keeps alive, waiters served in arrival order, fencing tokens
// from etcd's revisions. New builds a Locker over a *clientv3.Client you own
// (Close leaves it open); locker.Open builds one from a URL once this package
// is imported, with a client the Locker owns:
//
//	etcd://[user[:password]@]host[:port][,host[:port]…][/prefix][?params]
//
// The port defaults to 2379, the prefix (path) to DefaultPrefix. Query
// parameters, besides locker's ttl, namespace and owner:
//
//	request_timeout       WithRequestTimeout (Go duration)
//	dial_timeout          clientv3.Config.DialTimeout (default 5 s; Open reads the prefix within it)
//	tls                   https endpoints (true/false; implied by the next five)
//	ca_file, cert_file, key_file, server_name, insecure_skip_verify   clientv3.Config.TLS
//
// Over New, set TLS on your own clientv3.Config. Options: WithPrefix
// (Lockers with different prefixes are independent), WithRequestTimeout;
// WithLogger also gets the client's zap lines when Open made the client.
// With auth on, `role grant-permission R --prefix=true readwrite PREFIX` is
// all a Locker needs; refusals: locker.ErrUnauthorized (docs/design/security-etcd.md).
//
// TTLs are whole seconds: a TTL is rounded up to the next second and to the
// server's minimum lease TTL (locker.GrantedTTL reports it). A lock lives on
// a lease of T+R seconds (R = max(1, ⌈T/5⌉)) renewed by the Locker: a holder
// that stops refreshing frees its lock at its deadline, but a crashed
// holder's lock stays on the server up to T+R after the last renewal (T = 15 s
// → 18 s). Uncontended, acquire and release are one txn each; one Locker can
// hold as many locks as etcd holds keys.
//
// The token is the own key's CreateRevision: it strictly increases per key
// across holder crashes, lease expiry, reconnects, leader failovers, member
// restarts and replacements, as long as a majority keeps its data;
// restoring a snapshot older than a token can repeat it. Guard (NewGuard)
// admits a token and applies your txn ops atomically with Write.
//
// Waiters are served in the order their keys were created. A Locker keeps
// at most 8 waiting keys per lock; its further Acquires of the lock wait in
// the process, in arrival order, for a place (a crowd of keys stalled etcd).
//
// locker.Inspect, List, WithValue, Publish and Watch work: the holder is the
// lock's oldest key, the others wait (keys only). etcd keeps no grant time (Granted is
// zero); TTL is the holder's lease's time left, at most the lock's TTL. A
// watch survives member restarts and ends if its member loses the leader.
//
// N-permit locks (locker.WithLimit): the holders are the N oldest keys; a
// release wakes one waiter, served in arrival order; the limit is in every
// key, and another limit is refused (ErrInvalidOption). Inspect reports the
// oldest holder, and keys beyond the N as waiters. A minimum hold
// (WithMinHold d) keeps the key on a lease of ⌈d⌉ s granted after the lock:
// freed ≥ d after the grant, and after a crash at most ⌈d⌉ + T/2 + R later.
//
// Caveats: run etcd with --auto-compaction-retention; do not mix versions
// older than nested-prefix independence with this one on one prefix.
// Design, key layout and proofs: docs/design/etcd.md.
package etcd
