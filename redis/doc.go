// Package redis is the Redis backend of locker, on go-redis v9: locks on one
// Redis deployment (a single server, a Sentinel-managed master or a Cluster)
// with New, and the Redlock algorithm over independent masters with
// NewRedlock. Guard is a fencing guard for resources kept in Redis.
//
// # Operations
//
// Acquire, refresh and release are one server-side Lua script each, run with
// EVALSHA: one round trip apiece. A lock is a string key holding the lease's
// random owner id (and its label, for redis-cli users) with a PX expiry;
// refresh (PEXPIRE) and release (DEL) run only if the key still holds the
// caller's owner id, so nobody extends or deletes a lock they do not hold. A
// lock whose holder dies is freed by Redis at its TTL.
//
// Keys are stored as prefix + "{" + base64url(key) + "}" + ":lock", and the
// fencing counter beside it as … + ":fence". Base64url has no braces, so the
// hash tag is the whole encoded key: the two keys share a Cluster slot for
// any key (NUL, braces, quotes and Lua metacharacters included), and distinct
// keys never share a name.
//
// # Fencing tokens
//
// The acquire script sets the token to max(counter+1, server TIME in µs) and
// stores it as the new counter, in the same atomic step that takes the lock.
// The counter is never deleted or given an expiry. So, on one deployment,
// tokens of one key strictly increase in grant order:
//
//   - while the counter lives, by the +1;
//   - if the counter is lost — a restart without persistence, eviction under a
//     maxmemory policy that evicts keys without expiry (allkeys-*), FLUSHALL —
//     by the clock: every later token is at least the server's current time
//     in µs, and every earlier one was at most the time it was issued (or the
//     counter, which grows by one per acquisition, far slower than the
//     clock, once it has been seeded by it). This holds as long as the
//     server's clock does not step back further than the time the restart
//     took; Redis reads the wall clock (TIME), not a monotonic one.
//   - on a Sentinel or Cluster failover, the promoted replica has the counter
//     as replicated, which may lag the old master by the last few writes
//     (replication is asynchronous). Its tokens are then still floored by its
//     own clock; they are larger than every earlier one if the replica's
//     clock is not behind the old master's by more than the failover took.
//     A failover can also lose the lock itself (a replica that had not yet
//     received the SET grants it again): that is the known limit of Redis
//     locks without WAIT, and it is why tokens exist — the resource's fencing
//     guard refuses the old holder's writes once the new holder wrote.
//
// Tokens are below 2^53 (the scripts use Lua's doubles; µs times stay below
// it until the year 2255).
//
// # Waiting
//
// A waiter first tries once (the uncontended path is one round trip). If the
// key is held it registers with its Locker's waiter table, makes sure the
// Locker's one pub/sub subscription is running (started on the first wait,
// shared by every waiter of that Locker, ended by Close), tries again, and
// then sleeps until a release message for its key, or at most the holder's
// remaining PTTL (as the acquire script reported it) plus a little random
// jitter: that covers a holder that died without releasing and a message
// missed while the subscription reconnected. There is no fixed-interval
// polling, and no goroutine per waiter: each waits in its own Acquire call.
//
// Release publishes on one channel per prefix (prefix + "released") the
// encoded key and the owner id. A message wakes one waiter of that key in
// each subscribed Locker — the one waiting longest in that Locker — rather
// than all of them, so waiters do not stampede for a lock only one can take;
// a waiter that gives up passes an unused wake-up on. Across Lockers there is
// no queue: whichever Locker's waiter reaches Redis first wins (no FIFO).
// Every subscribed Locker receives every release of the prefix (one small
// message each); use distinct prefixes to partition very busy deployments.
// In a Cluster, PUBLISH is broadcast to every node, so one subscription on
// any node hears them all.
//
// A wait that ends (context done, Locker closed) leaves nothing behind: the
// waiter is only in process memory. An attempt whose outcome is unknown (the
// context ended or a timeout struck after the script was sent) is undone
// with the release script, conditional on the owner, before Acquire returns.
//
// # Redlock
//
// NewRedlock runs Redlock over N independent masters, quorum N/2+1. Each
// round sends the acquire script to all masters in parallel, each request
// bounded by a per-node timeout (Config.NodeTimeout; by default a tenth of
// the TTL, at most 250 ms). The lock's validity is TTL − elapsed − drift
// (drift = TTL/100 + 2 ms), measured on the monotonic clock from before the
// first request; the lock counts only if a majority granted it and validity
// is left. A failed round releases on every master, the silent ones too.
//
// The token: each granting master proposes its own max(counter+1, TIME µs);
// the token is the largest proposal of the granting majority, and it is
// written back (fence.lua, conditional on still holding the lock there) to
// the granting masters whose proposal was lower; the lock counts only once
// a majority holds the token. Any later majority intersects this one, reads
// a counter at least this high, and proposes more. Redlock's token guarantee
// holds as long as fewer than a majority of masters lose their counter at
// once (any number may, if their clocks are not behind).
//
// Refresh extends the lock on all masters and needs a majority to succeed
// within the new validity; each master may take up to a third of the TTL
// (the refresh interval) to answer, since the new deadline counts from
// before the refresh was sent. Acquire serializes the acquisitions of one key
// within a Locker (its goroutines would only split the masters among
// themselves); contenders from different Lockers that split the masters back
// off by a random multiple of their round time, doubling per split. Release deletes it everywhere; it reports
// ErrLeaseLost when no majority held it any more.
//
// Acquire returns an error wrapping locker.ErrUnavailable, without retrying,
// when more masters failed than a majority can spare; when other owners hold
// the lock it waits — on a subscription to every master, bounded by the time
// until a majority of masters will have expired the holder's lock — and
// contenders that split the masters retry after a random jitter. A failed
// round is retried up to three times (a loaded master may miss one node
// timeout) before the error is returned. A master
// that was paused during a round may apply the round's SET after its
// release, when it resumes: that key expires at its TTL, and a lone master
// cannot make a majority.
//
// TryAcquire makes one attempt in the contract's sense — it never waits for
// a holder — but that attempt may take up to three rounds, separated by the
// random jitter Acquire uses on a split, because one round does not always
// tell whether anybody holds the lock. It answers:
//
//   - the lease, when a round wins;
//   - ErrLocked only when another owner's grants alone make a majority of
//     the masters in one round: that owner holds the lock (or a round of
//     its own, of unknown outcome, just took a majority);
//   - an error wrapping ErrContended (reported by package locker as
//     ErrUnavailable) when the last round was split: the masters that
//     answered were shared between contenders (the caller's undone grants
//     included) and nobody — not the caller, not another owner — had a
//     majority. No one held the lock, so it is not ErrLocked; the caller
//     may try again, or use Acquire, which goes on until a contender wins;
//   - an error saying how many masters did not answer and that it "cannot
//     tell whether the lock is held" (ErrUnavailable) when the last round
//     left it undecidable: another owner's grants, with the silent masters,
//     could make a majority, but do not without them;
//   - an error wrapping ErrUnavailable, after one round, when more masters
//     failed than a majority can spare (as for Acquire).
//
// # Errors
//
// Connection failures, timeouts and server error replies are returned as they
// come from go-redis; package locker reports them as ErrUnavailable (or the
// context's error), never as ErrLocked. ErrContended (Redlock TryAcquire,
// see above) is reported as ErrUnavailable too, and matches itself with
// errors.Is. A TTL is rounded up to a whole
// millisecond, the unit of PX.
//
// # URLs
//
// Importing the package registers the schemes redis, rediss and redlock with
// locker.Open:
//
//	redis://[user:password@]host:port[/db][?options]   a single server
//	rediss://…                                         the same over TLS
//	redis://h1:p1,h2:p2,h3:p3[?options]                a Cluster (seed nodes)
//	redis://host:port?cluster=true                     a Cluster from one seed
//	redis://s1:p1,s2:p2/db?master_name=mymaster        Sentinel (sentinel addresses)
//	redis://h1:p1,h2:p2,h3:p3/db?redlock=true          Redlock over independent masters
//	redlock://h1:p1,h2:p2,h3:p3/db                     the same
//
// Besides go-redis's own query options (dial_timeout, pool_size, … as
// goredis.ParseURL reads them), the URL may set prefix (Config.Prefix) and
// node_timeout (Config.NodeTimeout, a Go duration). The clients Open makes
// honour context deadlines, are closed by Locker.Close, and must answer a
// PING at Open (for Redlock, a majority of the masters).
package redis
