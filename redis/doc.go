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
// The scripts run on Redis 3.2 and later; on Redis 7 and later (which set
// REDIS_VERSION_NUM) the acquire script reads the previous token and stores
// the new one with one SET … GET. An uncontended acquire runs three commands
// on the server (SET NX PX, TIME, SET … GET) and a release three (GET, DEL,
// a look at the waiter queue); the tests run Redis 7.0.
//
// Keys are stored as prefix + "{" + base64url(key) + "}" + ":lock", the
// fencing counter beside it as … + ":fence", and the waiter queue as … +
// ":q" and … + ":qd" (see Waiting). Base64url has no braces, so the hash
// tag is the whole encoded key: the keys of one lock share a Cluster slot for
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
// Each lock has a waiter queue in Redis beside it, in its hash slot: a
// sorted set … + ":q" of waiter ids by arrival (server TIME in µs), and a
// hash … + ":qd" of the server time (ms) after which each entry is stale.
// A waiter id is its Locker's random id, a colon and a sequence number; each
// Locker subscribes to its own channel, prefix + "w:" + its id — once, on
// its first wait, shared by all its waiters, ended by Close — and a wake-up
// is a waiter id published there, which wakes exactly that waiter.
//
// A waiter first tries once without queueing (the uncontended path is one
// round trip and does not touch the queue). If the key is held it registers
// with its Locker, makes sure the subscription runs, and tries again, this
// time with its id: a failed attempt puts it in the queue (ZADD NX, so it
// keeps its place on later attempts) and sets its entry's deadline to the
// holder's PTTL plus a tenth, plus a slack of 2 s + TTL/2. It then sleeps
// until a wake-up, or at most the holder's remaining PTTL plus a little
// random jitter: that covers a holder that died without releasing, a
// wake-up lost while the subscription reconnected, and a head waiter that
// crashed. There is no fixed-interval polling, and no goroutine per waiter.
//
// The scripts wake one waiter at a time, the head of the queue:
//
//   - release deletes the lock and publishes to the first live head,
//     dropping up to 16 stale heads on the way (waiters that did not come
//     back by their deadline: crashed or cut off); nothing when the queue is
//     empty. So a release wakes one waiter across all processes, not one per
//     Locker: no herd.
//   - a granted acquisition takes its waiter out of the queue and wakes the
//     new head, which tries once more and so sleeps for the new holder's
//     PTTL, not the one it saw before: a holder with a short TTL that dies
//     after one with a long TTL does not leave waiters asleep for the long
//     one. (Per handoff: the new holder's attempt and the next head's look.)
//   - a waiter that gives up (context ended, Locker closed) leaves the queue
//     with leave.lua, with its own short timeout like the clean-up below; if
//     it was the head and the lock is free, it may have taken a wake-up, and
//     the next head is woken instead. A cancelled or timed-out wait leaves
//     nothing behind: the queue keys carry a PEXPIRE as long as their
//     longest-lived entry, and vanish when empty or abandoned (and an entry
//     that could not be removed — Redis unreachable — goes stale and is
//     skipped).
//
// Waiters are served in arrival order as long as they come back by their
// deadline; an attempt that does not queue (TryAcquire, and the first
// attempt of Acquire) may take a free lock ahead of the queue, and wakes
// nobody: it can only take a lock whose holder released it (which woke the
// head) or let it expire (when the head's own wait ends), so the head's next
// try meets the new holder and waits on for its PTTL. A live waiter misjudged stale (a
// process stalled for seconds) loses its place and its wake-up, not the
// lock: it tries again at its fallback wait and queues anew. In a Cluster,
// PUBLISH is broadcast to every node, so a subscription on any node hears
// its wake-ups.
//
// An attempt whose outcome is unknown (the context ended or a timeout
// struck after the script was sent) is undone with the release script,
// conditional on the owner, before Acquire returns.
//
// # Redlock
//
// NewRedlock runs Redlock over N independent masters, quorum N/2+1. N
// counts distinct masters: a client given twice, or two clients of one
// address (as written: localhost and 127.0.0.1 differ), are one master, and
// fewer than 3 are refused unless allowed (WithAllowFewMasters; URL
// allow_few_masters=true). Each
// client must honour context deadlines (go-redis ContextTimeoutEnabled), or
// NewRedlock refuses it: go-redis would otherwise let a master that never
// answers hold every round up for its read timeout. Each
// round sends the acquire script to all masters in parallel, each request
// bounded by a per-node timeout (Config.NodeTimeout; by default a tenth of
// the TTL, at most 250 ms). The lock's validity is TTL − elapsed − drift
// (drift = TTL/100 + 2 ms), measured on the monotonic clock from before the
// first request; the lock counts only if a majority granted it and validity
// is left. A failed round releases on every master, the silent ones too.
//
// Each master keeps its own waiter queue, and a release wakes the head of
// each master's queue: at most N waiters, where one Redis wakes one. A
// master that grants in a round that then fails (no majority) has taken the
// waiter out of its queue and woken its next head; the waiter's next round
// queues it there again, at the back. The undo of a failed round wakes
// nobody. Redlock waiters are not served in arrival order.
//
// The token: each granting master proposes its own max(counter+1, TIME µs)
// — and, in a round that does not queue (grant.lua), the client's hint too:
// its clock + 1 s, taken only if at most 10 s ahead of the master's clock.
// When the hint is above every granting master's counter and clock (clocks
// within about a second), they all propose it and nothing needs writing
// back: an uncontended acquire is one round trip to every master. The hint
// only raises proposals, each still above its master's counter and clock,
// so the argument below is unchanged. The token is the largest proposal of
// the granting majority, and it is
// written back (fence.lua, conditional on still holding the lock there) to
// the granting masters whose proposal was lower, and (unconditionally: a
// fence only rises) to every master that answered the round without
// granting; the lock counts only once a majority of granting masters holds
// the token. A later grant's majority meets the masters that took the token
// in at least one master, which proposes more unless it lost its counter
// since. So a later token is larger unless every master of the later
// majority that took the earlier token lost its counter (restart without
// persistence, eviction) and has a clock behind that token. When every
// master answered the earlier round, that takes a majority of masters
// losing their counters; when only a bare majority answered it (the others
// down or silent), two majorities can meet in one master, and that
// master's loss alone can let a token repeat or go back.
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
// that was frozen or cut off during a round may run the round's SET when it
// resumes, after the undo and after the error returned: for up to a TTL
// after an acquisition fails, the clean-up by owner id goes on in the
// background on those masters (backoff 50 ms to 1 s) until each has
// released the lock or answered twice that it holds none; Close stops it.
//
// TryAcquire makes one attempt in the contract's sense — it never waits for
// a holder — but that attempt may take up to three rounds, separated by the
// random jitter Acquire uses on a split, because one round does not always
// tell whether anybody holds the lock. It answers:
//
//   - the lease, when a round wins;
//   - ErrLocked when a majority of the masters answered and did not grant:
//     contention, as on every backend. After one round when another
//     owner's grants alone make a majority (it holds the lock); after up to
//     three when the answering masters were split between contenders —
//     then the error also wraps ErrContended — or when another owner's
//     grants, with the silent masters, could make a majority;
//   - an error wrapping ErrUnavailable when more masters failed than a
//     majority can spare, in three rounds in a row (as for Acquire).
//
// # Errors
//
// Connection failures, timeouts and server error replies are returned as they
// come from go-redis; package locker reports them as ErrUnavailable (or the
// context's error), never as ErrLocked. ErrContended (Redlock TryAcquire,
// see above) comes wrapped in an ErrLocked. A TTL is rounded up to a whole
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
// goredis.ParseURL reads them), the URL may set prefix (Config.Prefix),
// node_timeout (Config.NodeTimeout, a Go duration) and, for Redlock,
// allow_few_masters (true: run on 1 or 2 distinct masters). The clients Open makes
// honour context deadlines, are closed by Locker.Close, and must answer a
// PING at Open (for Redlock, a majority of the masters).
package redis
