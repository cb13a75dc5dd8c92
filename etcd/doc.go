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
//	request_timeout       WithRequestTimeout (Go duration, default 5 s)
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
// TTLs are whole seconds, rounded up, and to the server's minimum lease TTL
// (locker.GrantedTTL reports it). A holder that stops refreshing frees its
// lock at its deadline; a crashed holder's lock stays on the server up to
// T+R after the last renewal, R = max(1, ⌈T/5⌉) (T = 15 s → 18 s).
//
// The token is the own key's CreateRevision: it strictly increases per key
// across holder crashes, lease expiry, reconnects, leader failovers, member
// restarts and replacements, as long as a majority keeps its data;
// restoring a snapshot older than a token can repeat it. Guard (NewGuard)
// admits a token and applies your txn ops atomically with Write.
//
// A Locker keeps at most 8 waiting keys per lock; its further Acquires wait
// in the process, in arrival order. A waiter whose lease dies queues again.
// Inspect, List, WithValue, Publish and Watch work (Granted is zero; a watch
// ends if its member loses the leader).
// WithLimit: the N oldest keys hold; another limit is ErrInvalidOption;
// fence permits with PermitGuard (a Guard admits only the highest token).
// WithMinHold d: not freed before d after the grant; after a crash, by ⌈d⌉+T/2+R.
//
// Caveats: run etcd with --auto-compaction-retention; do not mix versions
// older than nested-prefix independence with this one on one prefix. A
// leader frozen past an election (SIGSTOP, a paused VM) revokes, as it
// resumes, leases the new leader renewed: their locks are freed before the
// holders' deadlines, and only fencing protects what they guard.
// Design, key layout, permits, holds and proofs: docs/design/etcd.md.
package etcd
