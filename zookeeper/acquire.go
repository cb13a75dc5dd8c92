package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// maxCreateAttempts bounds the retries of one create: after a lost reply, a
// session expiry, or a lock directory the server removed meanwhile.
const maxCreateAttempts = 8

// errVanished: the own node disappeared while waiting (its session expired or
// someone deleted it). The acquisition fails rather than report a lock whose
// node is gone.
var errVanished = errors.New("zookeeper: own queue node vanished while waiting (session expired or node deleted)")

// dirGone is the error of a look at a queue whose directory is gone: the
// own node went with it — its session expired, then the server removed
// the empty container — so it vanished, and the Acquire queues again.
func dirGone(err error) error {
	return fmt.Errorf("%w: the lock directory is gone: %v", errVanished, err)
}

func (b *backend) TryAcquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	l, err := b.acquire(ctx, req, false)
	return l, unauthorized(err)
}

func (b *backend) Acquire(ctx context.Context, req *driver.Request) (driver.Lock, error) {
	l, err := b.acquire(ctx, req, true)
	return l, unauthorized(err)
}

func (b *backend) acquire(ctx context.Context, req *driver.Request, wait bool) (driver.Lock, error) {
	dir := b.dir(req.Key)
	prefix := ownerPrefix(req.Owner)
	limit := max(req.Limit, 1)
	if !wait {
		// A queue of limit nodes or more has every permit held: say so
		// without the two writes (create, delete) that queueing would cost.
		// The sync makes the read see every change the leader committed
		// before it, such as a release another client has just been told
		// is done.
		var kids []string
		err := b.do(ctx, func() (err error) {
			if _, err = b.conn.Sync(dir); err != nil {
				return ignoreNoNode(err)
			}
			kids, _, err = b.conn.Children(dir)
			return ignoreNoNode(err)
		})
		if err != nil {
			return nil, err
		}
		if len(parseChildren(kids)) >= limit {
			q, err := b.queue(ctx, dir, kids)
			if err != nil {
				return nil, err
			}
			if err := b.checkLimit(ctx, dir, q, "", limit); err != nil {
				return nil, err
			}
			return nil, locker.ErrLocked
		}
	}
	start := time.Now()
	session := b.conn.SessionID()
	data := nodeData{label: req.Label, ttl: b.SessionTimeout(), limit: limit, value: req.Value}
	backoff := waitAgainFirst
	name, dirStat, pending, err := b.create(ctx, dir, prefix, data.encode())
	for wait && err != nil && b.waitAgain(ctx, err, &backoff) {
		start, session = time.Now(), b.conn.SessionID()
		name, dirStat, pending, err = b.create(ctx, dir, prefix, data.encode())
	}
	if err != nil {
		gone := b.cleanup(dir, prefix, "", pending)
		return nil, b.gaveUp(ctx, err, gone)
	}
	var l *lock
	if dirStat != nil && dirStat.NumChildren == 1 && session != 0 && b.conn.SessionID() == session {
		// Granted by the create: its multi's reply says the own node was
		// the directory's only child (so first in the queue) as of the
		// transaction that made it, whose zxid is the node's czxid (the
		// directory's Mzxid). The session did not change between sending
		// the multi and its reply, so the request ran in it and the node is
		// its ephemeral. The watch that reports the lock's loss is set by
		// the lock's loss watch (lock.watchLoss), which checks the node first.
		l = newLock(b, req, dir+"/"+name, dirStat.Mzxid, session, start, nil)
	} else {
		l, err = b.contend(ctx, req, dir, name, data, wait)
		for wait && err != nil && b.waitAgain(ctx, err, &backoff) {
			if errors.Is(err, errVanished) {
				// The own node is gone (its session expired, or someone
				// deleted it): it held nothing, only a place. Queue again.
				b.cleanup(dir, "", name, nil)
				if name, _, _, err = b.create(ctx, dir, prefix, data.encode()); err != nil {
					continue
				}
			}
			// Otherwise the connection failed while we waited: the client
			// reconnects, and the node keeps its place if the session
			// lives on. Look again.
			l, err = b.contend(ctx, req, dir, name, data, wait)
		}
		if err != nil {
			gone := b.cleanup(dir, prefix, name, nil)
			return nil, b.gaveUp(ctx, err, gone)
		}
	}
	l.data = data
	if l.start.IsZero() {
		l.start = start
	}
	// l.start is when the request that proved the grant was sent; the
	// lease's validity starts at the touch the leader counts the session's
	// timeout from, earlier (touch.go).
	from, err := b.proveValidity(ctx, l.start, l.session)
	if err != nil {
		gone := b.cleanup(dir, prefix, name, nil)
		return nil, b.gaveUp(ctx, err, gone)
	}
	l.start, l.validUntil = from, from.Add(req.TTL)
	b.track(l)
	l.watchLoss()
	return l, nil
}

// waitAgainFirst and waitAgainMax bound the pause before a blocking Acquire
// tries again after a failure of its connection.
const (
	waitAgainFirst = 20 * time.Millisecond
	waitAgainMax   = time.Second
)

// waitAgain reports whether a blocking Acquire whose attempt failed with err
// goes on waiting, after a pause (which doubles, up to waitAgainMax): it
// does when the failure was the connection's or the session's, which the
// client mends by itself (reconnecting, or making a new session), or its
// node vanished, and neither ctx nor the backend has ended. An Acquire
// holds nothing while it waits, so a failure there loses at most its place
// — unlike a refresh, which reports the loss of a lease.
func (b *backend) waitAgain(ctx context.Context, err error, backoff *time.Duration) bool {
	if !retryable(err) && !errors.Is(err, errVanished) {
		return false
	}
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, waitAgainMax)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-b.closing:
		return false
	}
}

// waitEnded is the error of an Acquire that stops trying: err — or, when the
// backend closed or the context ended while it waited to try again, what
// stopped it.
func (b *backend) waitEnded(ctx context.Context, err error) error {
	select {
	case <-b.closing:
		return errClosed
	default:
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (the last attempt failed: %v)", cerr, err)
	}
	return err
}

// gaveUp is the error of an acquisition that ends without the lock, err (as
// waitEnded makes it), once its clean-up has run: gone reports the own node
// known gone (see cleanup). If it is not, the node may stay queued until the
// delete, retried in the background, gets through or its session expires,
// refusing or delaying others while the caller holds nothing: the outcome is
// ambiguous, and the error matches locker.ErrUnavailable — never
// locker.ErrLocked, which claims nothing was left behind. A backend closed
// meanwhile still says so, and an identity the server refused stays
// locker.ErrUnauthorized (see unauthorized), never ErrUnavailable.
func (b *backend) gaveUp(ctx context.Context, err error, gone bool) error {
	err = b.waitEnded(ctx, err)
	if gone || errors.Is(err, errClosed) || errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed) {
		return err
	}
	if errors.Is(err, locker.ErrLocked) {
		return fmt.Errorf("%w: zookeeper: refused (the key is held), and the own node's delete did not complete within %v: it may stay queued until the delete, retried in the background, gets through or its session expires",
			locker.ErrUnavailable, cleanupGrace)
	}
	return fmt.Errorf("%w: %w, and the own node's delete did not complete within %v: it may stay queued until the delete, retried in the background, gets through or its session expires",
		locker.ErrUnavailable, err, cleanupGrace)
}

// createResult is the outcome of one create request.
type createResult struct {
	path    string
	dirStat *zk.Stat // the directory's stat in the multi's reply, or nil
	err     error
}

// create makes the own ephemeral sequential node in dir and returns its
// name, and the directory's stat just after the create when the create's
// reply carried it (nil when the node was found again after a lost reply, or
// created without a multi). If ctx ends while a create is in flight, it
// returns that create's pending outcome, for the clean-up to wait on.
//
// The create is sent in a multi with a write of the directory's data: one
// transaction, so the directory's stat in the reply is as of that
// transaction: its Mzxid is the new node's czxid, and its child count says
// whether the node is alone, and so first in the queue. (go-zookeeper's
// plain create answers with the path alone.)
func (b *backend) create(ctx context.Context, dir, prefix string, data []byte) (string, *zk.Stat, <-chan createResult, error) {
	var err error
	switched := false // this call turned plainCreate on
	for range maxCreateAttempts {
		res := make(chan createResult, 1)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			res <- b.createOnce(dir, prefix, data)
		}()
		var r createResult
		select {
		case r = <-res:
		case <-ctx.Done():
			return "", nil, res, ctx.Err()
		}
		err = r.err
		switch {
		case err == nil:
			return path.Base(r.path), r.dirStat, nil, nil
		case errors.Is(err, zk.ErrNoNode):
			// The lock directory does not exist (yet, or any more: an empty
			// container is removed by the server).
			if err := b.ensureDir(ctx, dir); err != nil {
				return "", nil, nil, err
			}
		case errors.Is(err, zk.ErrConnectionClosed):
			// The request may have been applied with its reply lost: look for
			// the node by owner id before creating another.
			name, err := b.findOwn(ctx, dir, prefix)
			if err != nil {
				return "", nil, nil, err
			}
			if name != "" {
				return name, nil, nil, nil
			}
		case errors.Is(err, zk.ErrSessionExpired):
			// A node made in the expired session died with it: create again
			// in the new one.
		case errors.Is(err, zk.ErrNoAuth) && !b.plainCreate.Load():
			// The ACL lets us create children but not write the
			// directory's data: create without the multi from now on.
			b.plainCreate.Store(true)
			switched = true
		default:
			if switched && errors.Is(err, zk.ErrNoAuth) {
				// Refused the create too: an ACL refusing this identity
				// any write (another's lock directory), which says
				// nothing of the directories of other keys.
				b.plainCreate.Store(false)
			}
			return "", nil, nil, err
		}
	}
	return "", nil, nil, fmt.Errorf("create gave up after %d attempts: %w", maxCreateAttempts, err)
}

// createOnce sends one create: in a multi with a write of the directory's
// data (see create), or alone once the server refused us that write.
func (b *backend) createOnce(dir, prefix string, data []byte) createResult {
	if b.plainCreate.Load() {
		p, err := b.conn.Create(dir+"/"+prefix, data, zk.FlagEphemeralSequential, b.acl)
		return createResult{path: p, err: err}
	}
	rs, err := b.conn.Multi(
		&zk.CreateRequest{Path: dir + "/" + prefix, Data: data, Acl: b.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: dir, Data: nil, Version: -1})
	if err != nil {
		return createResult{err: err}
	}
	if len(rs) != 2 || rs[1].Stat == nil {
		return createResult{err: fmt.Errorf("zookeeper: multi answered %d results, want 2", len(rs))}
	}
	return createResult{path: rs[0].String, dirStat: rs[1].Stat}
}

// findOwn returns the name of the oldest node of prefix in dir, or "". It
// syncs first, so that a create applied by the leader before the connection
// broke is seen even through a lagging server.
func (b *backend) findOwn(ctx context.Context, dir, prefix string) (string, error) {
	var kids []string
	err := b.do(ctx, func() error {
		if _, err := b.conn.Sync(dir); err != nil {
			return err
		}
		var err error
		kids, _, err = b.conn.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, c := range parseChildren(kids) {
		if strings.HasPrefix(c.name, prefix) {
			return c.name, nil
		}
	}
	return "", nil
}

// ensureDir creates the lock directory: a container, or a persistent node
// where the server knows no containers. Only when the root is missing too
// are its nodes created (persistent), so the common case is one request.
func (b *backend) ensureDir(ctx context.Context, dir string) error {
	return b.do(ctx, func() error {
		err := b.createDir(dir)
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if err := b.ensureRoot(); err != nil {
			return err
		}
		return b.createDir(dir)
	})
}

func (b *backend) createDir(dir string) error {
	_, err := b.conn.CreateContainer(dir, nil, zk.FlagContainer, b.acl)
	if err != nil && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) && !retryable(err) {
		// Servers before 3.5.1 answer an unknown opcode ("unimplemented",
		// which go-zookeeper does not name): fall back to a persistent
		// directory, left behind when idle.
		_, err = b.conn.Create(dir, nil, zk.FlagPersistent, b.acl)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create lock directory: %w", err)
	}
	return nil
}

// errLimitMismatch: the key is in use with another limit.
var errLimitMismatch = fmt.Errorf("%w: the key is in use with another limit", locker.ErrInvalidOption)

// checkLimit reads the data of q's first node, unless it is the own node
// name, and returns an error wrapping locker.ErrInvalidOption if its limit
// is not limit. A first node gone meanwhile is passed over: the next
// look at the queue checks its new first node.
func (b *backend) checkLimit(ctx context.Context, dir string, q []child, name string, limit int) error {
	if len(q) == 0 || q[0].name == name {
		return nil
	}
	var raw []byte
	err := b.do(ctx, func() (err error) {
		raw, _, err = b.conn.Get(dir + "/" + q[0].name)
		return ignoreNoNode(err)
	})
	if err != nil || raw == nil {
		return err
	}
	if have := decodeData(raw).limit; have != limit {
		return fmt.Errorf("%w (limit %d, asked for %d)", errLimitMismatch, have, limit)
	}
	return nil
}

// contend waits, if wait is set, until the own node name is among the first
// data.limit nodes of dir, and returns the granted lock. It returns
// locker.ErrLocked when wait is not set and that many nodes are before it,
// and an error wrapping locker.ErrInvalidOption when the first node of the
// queue has another limit.
//
// A waiter wakes only when a permit may be its own: with one permit, it
// watches the node just before its own; with N, the first waiter (N nodes
// before it, all holders) watches those N, and a later waiter watches the
// node just before its own, which, once granted, writes its own node to
// wake it (see signalGrant). So a release wakes the first waiter, and its
// grant the next, which becomes the first.
func (b *backend) contend(ctx context.Context, req *driver.Request, dir, name string, data nodeData, wait bool) (*lock, error) {
	own := dir + "/" + name
	prefix := name[:33]
	limit := data.limit
	checked := false

	// The children and the own node's stat (with a watch that will report the
	// lock's loss) are asked for at once: pipelined on the one connection,
	// they cost about one round trip.
	type kidsResult struct {
		kids []string
		err  error
	}
	type ownResult struct {
		exists bool
		st     *zk.Stat
		w      <-chan zk.Event
		err    error
	}
	kc, oc := make(chan kidsResult, 1), make(chan ownResult, 1)
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		kids, _, err := b.conn.Children(dir)
		kc <- kidsResult{kids, err}
	}()
	go func() {
		defer b.wg.Done()
		exists, st, w, err := b.watchOwn(own)
		oc <- ownResult{exists, st, w, err}
	}()
	var (
		kr kidsResult
		or ownResult
	)
	for range 2 {
		select {
		case kr = <-kc:
		case or = <-oc:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sessionNow := b.conn.SessionID()
	if errors.Is(kr.err, zk.ErrNoNode) {
		return nil, dirGone(kr.err)
	}
	if err := errors.Join(or.err, kr.err); err != nil {
		return nil, err
	}
	kids, exists, st, ownW := kr.kids, or.exists, or.st, or.w
	if !exists {
		return nil, errVanished
	}
	czxid, session := st.Czxid, st.EphemeralOwner
	waited := false
	for {
		queue, err := b.queue(ctx, dir, kids)
		if err != nil {
			return nil, err
		}
		idx := -1
		for i, c := range queue {
			switch {
			case c.name == name:
				idx = i
			case strings.HasPrefix(c.name, prefix):
				// A second node of ours, from a create retried after a lost
				// reply: it must not hold a place in the queue.
				b.cleanup(dir, "", c.name, nil)
			}
		}
		if idx < 0 {
			return nil, errVanished
		}
		if !checked {
			// Every node checks the first one before it: so all nodes
			// of a queue agree on its limit.
			if err := b.checkLimit(ctx, dir, queue, name, limit); err != nil {
				return nil, err
			}
			checked = true
		}
		if idx < limit {
			break
		}
		if !wait {
			return nil, locker.ErrLocked
		}
		// Watch only what wakes us when a permit may be ours (see above).
		// GetW, not ExistsW: on a node already gone, ExistsW would leave a
		// watch for its re-creation — which never comes — on the client and
		// the server for the rest of the session; GetW sets none then.
		watched := queue[idx-1 : idx]
		if limit > 1 && idx == limit {
			watched = queue[:limit]
		}
		predWs, wake, err := b.watchNodes(ctx, dir, watched, limit > 1 && idx > limit)
		if err != nil {
			return nil, err
		}
		if !wake {
			waited = true
			cases := make([]reflect.SelectCase, 0, len(predWs)+3)
			for _, w := range predWs {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
			}
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ownW)},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(b.closing)})
			// A watched node deleted (or changed, or the watch ended with
			// the session or the connection): look again.
			switch i, v, _ := reflect.Select(cases); i - len(predWs) {
			case 0:
				ev, _ := v.Interface().(zk.Event)
				if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
					return nil, fmt.Errorf("%w: %v", errVanished, eventCause(ev))
				}
				ownW = nil // data changed: watched again once granted
			case 1:
				return nil, ctx.Err()
			case 2:
				return nil, errClosed
			}
		}
		wakeups.Add(1)
		err = b.do(ctx, func() (err error) {
			kids, _, err = b.conn.Children(dir)
			sessionNow = b.conn.SessionID()
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil, dirGone(err)
		}
		if err != nil {
			return nil, err
		}
	}

	var version int32
	if limit > 1 {
		var err error
		if version, err = b.signalGrant(ctx, own, data); err != nil {
			return nil, err
		}
		ownW = nil // the write fires the watch: set it again
	}
	var start time.Time
	if waited || ownW == nil || session != sessionNow {
		// The queue may have been read through a server that had not seen
		// the own node's deletion (a session that expired while we waited,
		// and a lagging follower, or one cut off from its peers, which
		// answers reads from its stale copy): sync with the leader, and
		// read the own node again before claiming the lock. That proves the
		// session alive at the quorum after the sync was sent: the lease's
		// validity starts there, not at an earlier read.
		start = time.Now()
		err := b.do(ctx, func() (err error) {
			var w <-chan zk.Event
			exists, st, w, sessionNow, err = b.syncRead(own, ownW == nil, start)
			if w != nil {
				ownW = w
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if !exists || st.Czxid != czxid {
			return nil, errVanished
		}
		session = st.EphemeralOwner
	}
	if session != sessionNow {
		return nil, fmt.Errorf("%w: node belongs to session %#x, the connection has session %#x", errVanished, session, sessionNow)
	}
	l := newLock(b, req, own, czxid, session, start, ownW)
	l.version = version
	return l, nil
}

// watchNodes sets a watch on each node of nodes in dir, the reads pipelined
// on the connection, and returns the watches. wake reports that there is
// nothing to wait for: a node is gone already, or, when granted is set, a
// node has been written since it was made (signalGrant: it holds a permit,
// and its write may have come before our watch).
//
// The results are locals, not named results: when ctx ends, b.do returns
// while the reads are in flight, and their late replies still write into
// the slices (a named result set to nil by the return would make them
// panic).
func (b *backend) watchNodes(ctx context.Context, dir string, nodes []child, granted bool) ([]<-chan zk.Event, bool, error) {
	ws := make([]<-chan zk.Event, len(nodes))
	gone := make([]bool, len(nodes))
	err := b.do(ctx, func() error {
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, c := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, st, w, err := b.conn.GetW(dir + "/" + c.name)
				switch {
				case errors.Is(err, zk.ErrNoNode):
					gone[i] = true
				case err != nil:
					errs[i] = err
				default:
					ws[i] = w
					gone[i] = granted && st.Mzxid != st.Czxid
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, false, err
	}
	return ws, slices.Contains(gone, true), nil
}

// signalGrant writes the own node of a permit just granted after the
// create (its data unchanged): the waiter behind it watches it, and is
// now the first waiter (see contend). It returns the node's new data
// version.
func (b *backend) signalGrant(ctx context.Context, own string, data nodeData) (int32, error) {
	var st *zk.Stat
	err := b.do(ctx, func() (err error) {
		st, err = b.conn.Set(own, data.encode(), 0)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return 0, fmt.Errorf("%w: %v", errVanished, err)
	case err != nil:
		return 0, err
	}
	return st.Version, nil
}

// syncRead syncs with the leader (a sync sent at after or later, see
// quorumSync) and then reads the node at p, setting a watch on it when watch
// is set (see watchOwn). It returns the connection's session id as of the
// read's reply.
func (b *backend) syncRead(p string, watch bool, after time.Time) (exists bool, st *zk.Stat, w <-chan zk.Event, session int64, err error) {
	if err = b.quorumSync(after); err != nil {
		return false, nil, nil, 0, err
	}
	if watch {
		exists, st, w, err = b.watchOwn(p)
	} else {
		exists, st, err = b.conn.Exists(p)
	}
	return exists, st, w, b.conn.SessionID(), err
}

// syncCall is one sync request, shared by the callers that may use it.
type syncCall struct {
	sent time.Time
	done chan struct{}
	err  error
}

// quorumSync returns once a sync sent at after or later has been answered:
// the server the connection uses has then caught up with the leader as of
// after, so it is not cut off from the quorum. Callers share syncs: a caller
// joins the newest one in flight if it was sent no earlier than after, and
// sends a new one otherwise (never waiting for an older one), so leases
// refreshed together cost one sync.
func (b *backend) quorumSync(after time.Time) error {
	b.syncMu.Lock()
	c := b.syncing
	if c == nil || c.sent.Before(after) {
		c = &syncCall{sent: time.Now(), done: make(chan struct{})}
		b.syncing = c
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			session := b.conn.SessionID()
			_, c.err = b.conn.Sync("/")
			if c.err == nil && session != 0 && b.conn.SessionID() == session {
				b.touches.record(touch{sent: c.sent, answered: time.Now(), session: session}, touchLag(b.SessionTimeout())/8)
			}
			b.syncMu.Lock()
			if b.syncing == c {
				b.syncing = nil
			}
			b.syncMu.Unlock()
			close(c.done)
		}()
	}
	b.syncMu.Unlock()
	<-c.done
	return c.err
}

// watchOwn reads the own node and sets a watch on it. It uses GetW, not
// ExistsW: on a node already gone, ExistsW would leave a watch for its
// creation (which never comes: the name is never made again) on the client
// and the server for the rest of the session.
func (b *backend) watchOwn(own string) (bool, *zk.Stat, <-chan zk.Event, error) {
	_, st, w, err := b.conn.GetW(own)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil, nil, nil
	}
	return err == nil, st, w, err
}

// queue returns the children of dir in queue order: by sequence number, or,
// when two share one (see tied), by czxid, the zxid of the transaction that
// made each, read from every child (the reads pipelined on the connection).
// Children gone meanwhile are left out.
func (b *backend) queue(ctx context.Context, dir string, kids []string) ([]child, error) {
	q := parseChildren(kids)
	if !tied(q) {
		return q, nil
	}
	czxids := make([]int64, len(q))
	err := b.do(ctx, func() error {
		errs := make([]error, len(q))
		var wg sync.WaitGroup
		for i, c := range q {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, st, err := b.conn.Exists(dir + "/" + c.name)
				switch {
				case err != nil:
					errs[i] = err
				case ok:
					czxids[i] = st.Czxid
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, err
	}
	out := q[:0]
	for i, c := range q {
		if czxids[i] != 0 {
			out = append(out, child{name: c.name, seq: czxids[i]})
		}
	}
	slices.SortFunc(out, func(a, b child) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// resetDir deletes dir if it is empty and the sequence number seq of a node
// just deleted from it is past 2^30: the directory is then made again with
// its counter at 0, before ZooKeeper stops the counter at 2^31-1 (see tied).
// The server refuses to delete a directory with children: a queue in use is
// left alone.
func (b *backend) resetDir(ctx context.Context, dir string, seq int64) {
	if seq < 1<<30 {
		return
	}
	_ = b.do(ctx, func() error { return b.conn.Delete(dir, -1) })
}

// eventCause says why a watch fired, as an error.
func eventCause(ev zk.Event) error {
	switch {
	case ev.Err != nil:
		return ev.Err
	case ev.Type == zk.EventNodeDeleted:
		return errors.New("zookeeper: own node deleted")
	}
	return fmt.Errorf("zookeeper: watch event %v", ev.Type)
}
