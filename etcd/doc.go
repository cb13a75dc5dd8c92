// Package etcd is the etcd backend of locker, on go.etcd.io/etcd/client/v3:
// leases kept alive by the library, one key per waiter, compare-and-swap
// transactions, and fencing tokens taken from etcd's revisions.
//
// Build a Locker from a client you own with New, or from a URL with
// locker.Open once this package is imported:
//
//	etcd://[user[:password]@]host[:port][,host[:port]…][/prefix][?params]
//
// The port defaults to 2379 and the prefix to DefaultPrefix ("locker/").
// Parameters: tls=true (https endpoints; implied by any of the next four),
// ca_file, cert_file and key_file (PEM files), server_name,
// insecure_skip_verify, dial_timeout and request_timeout (Go durations),
// besides locker's own ttl, namespace and owner. Open checks that the
// cluster answers a read of the prefix within dial_timeout (default 5 s).
//
// # How a lock works
//
// A lock named K lives in the range P + esc(K) + "/", where P is the prefix
// and esc escapes '%', '/' and NUL, so that the ranges of two distinct keys
// ("a" and "a/b") never overlap. Each acquisition puts one key in that range,
// in a txn guarded on the key's CreateRevision being 0. The key is named by
// the Locker's lease id and a slot number reserved for this acquisition
// until its key is known to be gone, and holds the acquisition's random
// owner id and label. Names are reused by later acquisitions of the same
// Locker rather than made fresh each time: every deleted key stays in etcd's
// key index until the next compaction, and the range reads over a lock would
// otherwise slow down with each past acquisition of it (run etcd with
// --auto-compaction-retention anyway: etcd keeps all history without it). The holder is the key with the smallest create
// revision. Acquire reads, in the same txn, the key created just before its
// own; if there is none, the lock is held after one round trip. Otherwise it
// watches only that predecessor's deletion (no thundering herd: a release
// wakes one waiter), so waiters are served in the order their keys were
// created: FIFO. After every wake-up, watch error or reconnection, a
// linearizable txn re-checks that the own key still exists with its create
// revision before looking for the next predecessor: a watch alone can miss
// that the own key's lease expired meanwhile (the Jepsen etcd 3.4.3 finding
// against the concurrency package). Waits survive leader elections and
// reconnections as long as the own key's lease lives.
//
// TryAcquire puts its key only if the whole range is empty (a compare over
// the range), so a failed attempt leaves nothing to delete.
//
// A cancelled or failed wait deletes its own key, comparing its create
// revision; an acquire whose txn outcome is unknown deletes its key only if
// it holds its owner id. If that delete fails it is retried in the background
// until it succeeds, the lease dies (and the key with it) or the Locker
// closes (and revokes the lease).
//
// # Fencing
//
// Token is the own key's CreateRevision: etcd's revision counter is
// cluster-wide, strictly increasing and replicated through Raft, so tokens of
// successive holders of a key strictly increase across holder crashes,
// lease expiry, client reconnects, and leader failovers and member restarts,
// as long as a majority of the members keeps its data (etcd's own
// durability: an acknowledged write is on a majority's disk). Restoring a
// cluster from a snapshot older than a token can repeat it. Refresh and
// Release compare the own key's create revision in a txn, so a retried or
// late release never deletes a newer holder's key. Guard is a fencing guard
// for state kept in etcd: the writer's operations commit in one txn with the
// check that no higher token was admitted.
//
// # Leases and TTLs
//
// etcd leases live whole seconds: RoundTTL rounds a TTL up to the next
// second (1 s at least, and at least the server's minimum once a grant has
// revealed a higher one). A Lease's TTL T is that rounded value.
//
// Leases are shared. Granting a lease per acquisition would cost a round
// trip on every acquire and a revoke on every release; instead a Locker
// keeps one lease per TTL, granted on first use, renewed in the background
// and revoked by Close, and every acquisition with that TTL attaches its key
// to it. Uncontended, an acquire is one txn and a release one txn. Sharing
// is made safe three ways:
//
//   - Two acquisitions never share an etcd key, because each reserves its
//     own slot of the lease for the key name (sharing a key is the
//     concurrency package's shared-session bug: two Mutexes of one session
//     on one name both "hold" it, as its key is the prefix and the lease id).
//   - The shared lease is granted for T + R seconds, R = max(1, ⌈T/5⌉), and
//     renewed every R/3 with unary KeepAliveOnce requests whose send times
//     are recorded. A lock claims validity only from min(the send time of
//     the request that won it, last renewal sent + T + R − T): the server
//     keeps the key at least until Start + T, without a renewal on the
//     acquire path. If renewals stall, new locks get an earlier Start, and
//     locker reports a lock granted past its deadline as lost.
//   - A lock outlives its TTL on the server only while its client lives and
//     renews the lease. When its local deadline passes without a refresh,
//     locker calls Expire (driver.Expirer), which deletes the own key,
//     comparing its create revision, so a holder that stops refreshing frees
//     the lock within T. A crashed client stops renewing: its locks are
//     freed when the lease expires, between T and T + R after the last
//     renewal (plus up to 0.5 s for etcd's expiry scan). A server whose
//     election timeout makes its minimum lease TTL (1.5 × election timeout,
//     2 s by default) exceed T + R grants the longer TTL; later TTLs are
//     then rounded up to match.
//
// So the TTL a lease really gets on the server is T + R whole seconds (T = 1 s
// → 2 s, 15 s → 18 s, 60 s → 72 s), renewed while the Locker runs; the TTL
// a lock gets is T, enforced by the client (Expire) and, when the client
// dies, by the lease within T + R.
//
// Refresh checks with one linearizable txn that the own key still exists
// with its create revision; when the last background renewal is too old to
// cover T from the refresh, it renews the lease first. The lease's loss
// (the server answers that it is gone, or no renewal succeeded for T + R)
// ends every lease on it at once: Done closes.
//
// # Errors and timeouts
//
// Every request is bounded by Config.RequestTimeout (default 5 s; the etcd
// client otherwise waits for a connection until the caller's context ends),
// so an unreachable cluster is reported as locker.ErrUnavailable. Waiting
// for a lock is not bounded by it.
//
// # Compatibility
//
// Tested against etcd 3.6 (single member and a 3-member cluster) and 3.4
// (Debian's 3.4.23). Compares over a key range need etcd 3.3 or later.
package etcd
