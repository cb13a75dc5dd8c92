// Package zookeeper is the ZooKeeper backend of locker, on
// github.com/go-zookeeper/zk. A lock is an ephemeral sequential node in a
// directory per key; waiters queue in order (FIFO) and a release wakes one. Design and proofs: docs/design/zookeeper.md.
//
// Construct it over your connection with New (you keep it; give the session
// timeout you asked for and the connection's events), or from a URL through
// locker.Open, which makes a connection the Locker owns and closes:
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
// Other options: WithACL, WithDialer, WithEvents (New only); security: docs/design/security-zookeeper.md.
// locker.WithLogger reaches go-zookeeper's log (debug level) and the Locker's background work.
//
// TTL: a node lives as long as its session, so every lease's TTL is the
// session timeout S: a shorter TTL is rounded up to S (locker.GrantedTTL
// says so; S is the default TTL), a longer one is refused with
// locker.ErrInvalidOption. A crashed holder's lock lives S on the server. A
// refresh syncs with the leader (one request, shared by the leases of a
// Locker), so a follower cut off from its peers cannot extend a lease; when
// the connection stays down for 0.22·S, every lease of the session is
// reported lost.
//
// The token is the own node's czxid, which the leader assigns in one total
// order: it grows across holder crashes, session expiry, reconnects, server
// restarts and replacements, and leader changes, as long as a quorum keeps
// its data directories. Guard admits a token and applies writes to
// ZooKeeper in one multi (Guard.Write).
//
// locker.Inspect syncs with the leader first, so a lagging follower cannot
// show a stale holder. Granted is the node's ctime (when the holder queued:
// ZooKeeper records no grant); TTL is the holder's session timeout, an upper
// bound (negative for a node of an older version). locker.Publish sets the
// own node's data, conditionally on its version. locker.Watch ends at a
// disconnection or session expiry (for New, seen only with WithEvents).
//
// locker.WithLimit(n) (N-permit locks): the first n nodes of the queue hold;
// a release wakes one waiter, served in queue order (FIFO); the limit is
// stored in each node, another limit is refused with locker.ErrInvalidOption.
// Inspect shows the oldest permit, and the nodes past the first n as
// waiters. locker.WithMinHold is refused (locker.ErrUnsupported): a node
// dies with its session, and a hold past it is not built (see the design).
//
// go-zookeeper calls take no context: a call whose context ends goes on in
// the background until ZooKeeper answers or the connection closes.
package zookeeper
