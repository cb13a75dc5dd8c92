package zookeeper

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// cleanupGrace is how long a failed acquisition waits for its clean-up before
// returning: long enough for a delete on a live connection, short enough that
// a call whose context ended returns promptly when ZooKeeper is unreachable.
// The clean-up goes on in the background after that.
const cleanupGrace = 2 * time.Second

// cleanup removes, in the background, what a failed acquisition left in dir:
// the node known (if not ""), and every node whose name starts with prefix
// (if not "") once pending, a create still in flight, has an outcome. The
// caller waits for it up to cleanupGrace. It reports whether the own nodes
// are known gone when it returns: deleted, found absent, or ended with their
// session. If not, they may still be queued, refusing or delaying others
// until the clean-up gets through or their session expires (see gaveUp).
func (b *backend) cleanup(dir, prefix, known string, pending <-chan createResult) bool {
	done := make(chan bool, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		done <- b.removeOwn(dir, prefix, known, pending)
	}()
	t := time.NewTimer(cleanupGrace)
	defer t.Stop()
	select {
	case gone := <-done:
		return gone
	case <-t.C:
	case <-b.closing:
	}
	return false
}

// removeOwn deletes the own nodes, retrying on connection errors until they
// are gone, their session has ended, the backend closes, or twice the session
// timeout has passed (by then a session cut off from the ensemble has
// expired, and its ephemeral nodes with it). It reports whether they are
// known gone: deleted, found absent, never created, or their session ended.
func (b *backend) removeOwn(dir, prefix, known string, pending <-chan createResult) bool {
	ctx, cancel := context.WithTimeout(b.ctx, max(2*b.SessionTimeout(), 5*time.Second))
	defer cancel()
	session := b.conn.SessionID()
	if pending != nil {
		select {
		case r := <-pending:
			switch {
			case r.err == nil:
				known = r.path[len(dir)+1:]
				prefix = "" // the create's outcome is known: nothing else to look for
			case errors.Is(r.err, zk.ErrConnectionClosed):
				// Unknown outcome: look for it by prefix below.
			default:
				prefix = "" // refused by the server: nothing was created
			}
		case <-ctx.Done():
			return false
		}
	}
	backoff := 20 * time.Millisecond
	for {
		err := b.removeOnce(ctx, dir, prefix, known)
		if err != nil && (ctx.Err() != nil || !retryable(err)) && b.ctx.Err() == nil {
			b.log.Warn("zookeeper: clean-up of an own node gave up", "dir", dir, "node", known, "err", err)
		}
		if err == nil {
			return true
		}
		if ctx.Err() != nil || !retryable(err) {
			return false
		}
		if known != "" && prefix == "" && b.conn.SessionID() != session {
			return true // the node was ephemeral in a session that has ended
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
}

// removeOnce makes one attempt at deleting the own nodes.
func (b *backend) removeOnce(ctx context.Context, dir, prefix, known string) error {
	return b.do(ctx, func() error {
		if known != "" {
			if err := b.conn.Delete(dir+"/"+known, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		if prefix == "" {
			return nil
		}
		if _, err := b.conn.Sync(dir); err != nil {
			return ignoreNoNode(err)
		}
		kids, _, err := b.conn.Children(dir)
		if err != nil {
			return ignoreNoNode(err)
		}
		for _, k := range kids {
			if strings.HasPrefix(k, prefix) {
				if err := b.conn.Delete(dir+"/"+k, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return err
				}
			}
		}
		return nil
	})
}

func ignoreNoNode(err error) error {
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// retryable reports whether a request may succeed if sent again: it failed
// for want of a connection, not because the server refused it.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrSessionExpired)
}
