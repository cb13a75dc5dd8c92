// Package redis is the Redis backend of locker, on go-redis v9: New over
// one deployment (a single server, a Sentinel master or a Cluster: any
// goredis.UniversalClient), NewRedlock over independent masters, and Guard,
// a fencing guard for resources kept in Redis. The client stays the
// caller's; make it with ContextTimeoutEnabled, or calls outlive contexts.
//
//	l, err := redis.New(client, locker.WithTTL(10*time.Second), redis.WithPrefix("app:"))
//	l, err := locker.Open(ctx, "redis://localhost:6379/0?prefix=app:")
//
// URLs: redis://[user:pass@]host:port[/db] (rediss:// for TLS); several
// hosts or cluster=true: a Cluster; master_name=m: Sentinel (the hosts are
// sentinels); redlock=true or redlock://h1,h2,h3: Redlock. Open owns the
// clients it makes. Besides go-redis's own parameters (dial_timeout,
// pool_size, …, range-checked), each query parameter is the option of the
// same name:
//
//	prefix             WithPrefix           key and channel prefix (default "locker:")
//	node_timeout       WithNodeTimeout      per-master timeout of Redlock (Go duration)
//	accept_eviction    WithAcceptEviction   run on a server whose maxmemory-policy evicts
//	allow_few_masters  WithAllowFewMasters  Redlock on fewer than 3 distinct masters
//
// Tokens: max(counter+1, server time in µs), from the acquire script; they
// increase across holder crashes, expiry and restarts (also without
// persistence, unless the server's clock steps back), and across a
// failover if the replica's clock is not behind. A failover or an evicting
// maxmemory-policy can grant a lock twice: fence the resource. Redlock's
// token is the largest a granting majority proposes, written back to every
// master that answered: it increases unless the masters that took the
// earlier token and meet the later majority all lost their counters.
//
// Inspect, List (SCAN, every master of a Cluster), WithValue, Publish and
// Watch work on both; the grant time is the server's TIME. Watch follows
// the lock's channel, signalled by every grant, release and publish, and a
// timer at the holder's PTTL. Redlock inspects by majority: held when a
// majority of all masters hold the lock for one owner; Waiters is -1.
//
// Caveats: TTLs are whole milliseconds; a crashed holder's lock lives its
// TTL on the server; waiters are woken in arrival order, but a TryAcquire (or
// the first try of an Acquire) may take a free lock ahead of them; a server
// with an evicting maxmemory-policy is refused (ErrEvictingPolicy) unless
// accepted. go-redis logs through one process-wide logger that WithLogger
// cannot reach: route it with goredis.SetLogger(redis.GoRedisLogger(l)).
//
// The design (key layout, scripts, waiting, Redlock, proofs) is in
// docs/design/redis.md.
package redis
