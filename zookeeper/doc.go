// Package zookeeper is the ZooKeeper backend of locker, on
// github.com/go-zookeeper/zk. A lock is an ephemeral sequential node in a
// directory per key; waiters queue in order (FIFO) and a release wakes one.
//
// New builds a Locker over your connection (you keep it), given its
// negotiated session timeout (WithSessionTimeout: the one you asked for, if
// the server allows it) and its events (WithEvents); locker.Open builds one
// from a URL, over a connection the Locker owns and closes:
//
//	zookeeper://[user:password@]host1:2181,host2:2181/root?session_timeout=15s
//
// The path is the root (WithRoot, default /locker); user:password (WithDigest)
// authenticates every session and gives every node created to that identity
// alone, refusals being locker.ErrUnauthorized. Query parameters:
//
//	session_timeout  WithSessionTimeout  session timeout to request (default 15s; the server bounds it)
//	connect_timeout  WithConnectTimeout  how long Open waits for a session (default 10s)
//	tls, ca_file, cert_file, key_file, server_name, insecure_skip_verify  WithTLS: the secure client port
//
// Other options: WithACL, WithDialer (URLs only). locker.WithLogger gets the
// background work and a URL connection's go-zookeeper log (debug level).
// Security: docs/design/security-zookeeper.md.
//
// TTL: a node lives as long as its session, so every lease's TTL is the
// session timeout S, also the default: a shorter TTL is rounded up to S
// (locker.GrantedTTL), a longer one is locker.ErrInvalidOption. A crashed
// holder's lock lives S on the server. A refresh syncs with the leader, so a
// cut-off follower cannot extend a lease. The leader hears of a session on a
// follower only in its ping replies, so a lease counts from a request
// answered S/4 before its grant or refresh and ends S/4 to S/3 sooner than S
// after them (a Locker syncs every S/16 when nothing else does; New's waits
// S/4 before its first grant). A connection down for 0.22·S
// reports every lease of the session lost (New: with WithEvents). A blocking
// Acquire rides out a failed connection or an expired session (queueing
// again if its node went with it) until its context ends. A failed or
// refused acquisition deletes its node; one whose delete does not complete
// within 2 s (the node may stay queued a while) fails with ErrUnavailable.
//
// The token is the own node's czxid: it grows across holder crashes, session
// expiry, reconnects, server restarts and replacements, and leader changes,
// as long as a quorum keeps its data directories. Guard admits a token and
// applies writes to ZooKeeper in one multi (Guard.Write).
//
// Inspect syncs with the leader first; Granted is when the holder queued (its
// node's ctime); TTL is the holder's session timeout, an upper bound. Publish
// works; Watch ends at a disconnection or session expiry (New: seen with
// WithEvents). WithLimit(n): the first n nodes hold; another limit is
// locker.ErrInvalidOption. WithMinHold is locker.ErrUnsupported. go-zookeeper
// takes no context: a call whose context ends goes on until ZooKeeper answers
// or the connection closes. Design and proofs: docs/design/zookeeper.md.
package zookeeper
