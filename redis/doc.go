// Package redis is the Redis backend of locker, on go-redis v9: New over
// one deployment (a server, a Sentinel master or a Cluster: any
// goredis.UniversalClient), NewRedlock over independent masters, and Guard,
// a fencing guard for resources kept in Redis. The client stays the
// caller's; make it with ContextTimeoutEnabled, or calls outlive contexts
// (NewRedlock refuses a client without it).
//
//	l, err := redis.New(client, locker.WithTTL(10*time.Second), redis.WithPrefix("app:"))
//	l, err := locker.Open(ctx, "redis://localhost:6379/0?prefix=app:")
//
// URLs: redis://[user:pass@]host:port[/db] (rediss:// for TLS); several
// hosts or cluster=true: a Cluster; master_name=m: Sentinel (the hosts are
// sentinels; user info logs in to the data nodes, sentinel_username and
// sentinel_password to the sentinels); redlock=true or
// redlock://h1,h2,h3: Redlock. Open owns the clients it makes. Besides
// go-redis's parameters (range-checked), prefix (default "locker:"),
// node_timeout (Redlock's per master), accept_eviction and
// allow_few_masters set the options of those names (WithPrefix, …); the
// shared TLS parameters (tls, ca_file, cert_file, key_file, …) and, for
// Redlock, password_N and username_N (master N's credentials) are read too.
// A parameter given twice (but go-redis's addr) is refused: ErrInvalidURL.
//
// Refused credentials or permissions (NOAUTH, WRONGPASS, NOPERM, a client
// certificate refused) are locker.ErrUnauthorized. A user denied CONFIG GET
// needs accept_eviction; users sharing a prefix can do anything there.
// The minimal ACL and TLS: docs/design/security-redis.md.
//
// Tokens: max(counter+1, server time in µs): they increase across crashes,
// expiry, restarts (unless the server's clock steps back) and a failover if
// the replica's clock is not behind. A failover or an evicting
// maxmemory-policy can grant a lock twice: fence the resource. Redlock's is
// the largest a granting majority proposes, written back: it increases
// unless every master of the later majority that took it lost its counter.
//
// Inspect, List, WithValue, Publish, Watch and WithMinHold work on both;
// WithLimit (N permits, no values) on New only. N permits are valid at once,
// so a Guard (highest token wins) would refuse all but one: use PermitGuard.
//
// Caveats: TTLs are whole milliseconds; a crashed holder's lock lives its
// TTL; waiters are woken one at a time in arrival order, but a TryAcquire
// (or an Acquire's first try) may take a free lock ahead of them; a Locker
// queues at most 8 Acquires of a lock in Redis (Redlock: 1), the rest wait
// in the process in arrival order; Redlock's Close waits out a refresh
// sent to a silent master unless it owns the clients; a server with an evicting
// maxmemory-policy is refused (ErrEvictingPolicy) unless accepted. Route
// go-redis's own logger with goredis.SetLogger(redis.GoRedisLogger(l)).
// Design (keys, scripts, waiting, permits, holds, Redlock, proofs): docs/design/redis.md.
package redis
