// Package zookeeper is the ZooKeeper backend of locker, on
// github.com/go-zookeeper/zk.
//
// # How a lock is held
//
// Every key has a directory node under the root (default /locker): the key,
// encoded with unpadded base64url into one path segment, so that "a" and
// "a/b", "..", or a namespace's NUL separator never nest, collide or escape
// the root. The directory is a container node, which the server removes once
// it is empty (a persistent node on servers older than 3.5.1, which do not
// know containers). Each acquisition creates an ephemeral sequential child
// named after its owner id ("<32 hex digits>-<sequence>"), holding the owner
// label as data. The child with the lowest sequence number holds the lock;
// each other child watches only the child just before it, so a release wakes
// exactly one waiter and waiters are served in arrival (FIFO) order.
//
// Because a child's name carries its owner id, a create whose reply is lost to
// a connection loss is found again (after a sync) by that id instead of being
// created twice. The create is sent in a multi (one transaction) with a write
// of the directory's data, whose reply carries the directory's stat as of
// that transaction: when it counts one child, the new node is alone in the
// queue and so holds the lock, and when the session is the same before and
// after the request, the node is that session's ephemeral. Such a grant needs
// no further read. Otherwise (other nodes queued, a session that changed, a
// node found again after a lost reply) the acquisition lists the queue and
// reads its own node; before it reports success it checks that the node
// exists, has the czxid it was created with, and that its ephemeralOwner is
// the current session; if the connection was re-established meanwhile (or
// the Locker cannot see reconnects: New without Events) and it waited, it
// syncs with the leader first, so that a session that expired while waiting,
// read through a lagging server, never reports a lock it no longer has. Every
// failure path (a cancelled wait, a failed list or watch, a TryAcquire that
// finds the key held) deletes the own node, retrying until it is gone, the
// session has ended, or the Locker closes.
//
// The write of the directory's data (empty data, any version) is harmless
// but visible: the directory's data version and mzxid move with every
// acquisition. It needs the write permission on the directory; when the
// server refuses it (a Config.ACL without zk.PermWrite), the Locker creates
// its nodes with a plain create from then on, and every acquisition lists the
// queue and reads its own node.
//
// TryAcquire first syncs and lists the queue, and reports locker.ErrLocked
// when it is not empty, without writing; it queues (and deletes its node
// again if it is not first) only when the queue looked empty.
//
// # Fencing tokens
//
// The token is the own node's czxid: the zxid of the transaction that created
// it, which is also the Mzxid of the directory in the create's multi reply
// (the same transaction wrote it), or else read from the node itself.
// Zxids are assigned by the leader in one total order for the whole
// ensemble, so for one key a later grant always has a larger token: across
// holder crashes, session expiry, client reconnects, server restarts and
// leader changes, as long as the ensemble keeps its transaction log (a quorum
// of servers keeps its data directories). A new epoch after a leader election
// makes zxids jump, never go back. The node's sequence number is never used:
// it is a signed 32-bit counter of the parent, restarted when a container
// parent is removed and created again.
//
// # Cost of an uncontended lock
//
// Acquire is one round trip and Release one: the create's multi, whose reply
// grants the lock (see above), then the delete; go-zookeeper's zk.Lock takes
// three (create, list, delete). TryAcquire adds its sync and listing before
// the create. The lock directory is created only when a create finds it
// missing. Right after the grant, the lock's watcher reads the own node with
// a watch (the watch that reports the lock's loss), in the background: if the
// node is already gone, or is not this lease's, the loss is reported then. A
// contended acquisition costs as before: the multi, the listing and a read of
// the own node sent together, a watch on the predecessor, and a listing after
// each wake-up.
//
// The loss watch is on the own node, not a child watch on the directory: a
// child watch fires at every node that joins or leaves the queue, so the
// holder would read the queue again for each new waiter, and a waiter's watch
// left from its first listing would fire at the next release (a second
// wake-up beside the successor's).
//
// (Earlier versions sent a plain create and read the own node for its czxid:
// go-zookeeper exposes no create2, whose reply carries the node's stat, and
// the directory's stat from a listing cannot prove the create was the last
// change. The multi's reply can: it is the stat of that one transaction.)
//
// # TTL and sessions
//
// A ZooKeeper node lives as long as the session that created it, not for a
// TTL. The package maps the TTL onto the session timeout S negotiated with the
// server (Locker.SessionTimeout reports it):
//
//   - A TTL shorter than S is rounded up to S: a crashed client's session, and
//     so its locks, may live S on the server.
//   - A TTL longer than S is accepted only when the Locker sees the
//     connection's state (Dial, Open, or New given the connection's Events),
//     and refused with locker.ErrInvalidOption otherwise. The danger is a
//     client cut off from the ensemble: the server expires its session S after
//     it last heard from it and grants its locks to others, while the lease's
//     local deadline may be later. So a disconnection is suspect: if the
//     session is not back within 0.22·S (S/3 less margins for a round trip and
//     clock drift: go-zookeeper
//     reports a silent connection dead after 2S/3, so the session is certain to
//     live that much longer), every lease of the session is reported lost at
//     once, and its node deleted if the session comes back after all.
//
// A holder that stays alive but stops refreshing keeps its session (the client
// pings in the background); when its local deadline passes, its own node is
// deleted (driver.Expirer), so the lock is free within the TTL as the contract
// requires. A refresh is one read of the own node: it proves that the session
// was alive at the server after the refresh began, and that the node is still
// the one this lease created, owned by the current session.
//
// Session expiry ends every lease of the session at once: each held lock keeps
// a watch on its own node (set just after the grant, for a lock granted by
// its create), and both its deletion and the expiry of the session are
// reported as loss. The client learns of an expiry only when it
// reconnects; until then the lease ends at its local deadline, or earlier by
// the suspect rule above.
//
// A lease granted after a wait starts (for its deadline) when the last read
// of the queue was sent, not when its node was created: that read proves the
// session alive.
//
// # Connections
//
// Dial and the URL scheme "zookeeper" make a connection (and session) the
// Locker owns and closes. New uses a *zk.Conn the caller owns; the caller must
// then say which session timeout the server negotiated, because go-zookeeper
// does not export it. go-zookeeper calls take no context: each call that may
// block runs in a goroutine the caller stops waiting for when its context
// ends; such goroutines end when ZooKeeper answers or the connection closes.
//
// # URLs
//
//	zookeeper://[user:password@]host1:2181,host2:2181/root?session_timeout=15s&connect_timeout=10s
//
// The path is the root (default /locker). user:password, when given, is sent
// as digest authentication, and nodes are created with an ACL that gives that
// identity all rights. session_timeout is the session timeout requested (the
// server bounds it by its min/maxSessionTimeout; default 15s, the default
// TTL); connect_timeout bounds how long Open waits for the first session
// (default 10s, and never past Open's context).
//
// # Fencing guard
//
// Guard keeps the highest token admitted per resource in a ZooKeeper node and
// admits a write only in the same multi transaction that checks that node's
// version and records the token: state kept in ZooKeeper is never written with
// a stale token.
package zookeeper
