package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
)

// unauthorized marks err as locker.ErrUnauthorized, keeping ZooKeeper's
// message, when ZooKeeper refused the session's identity: NOAUTH (an ACL
// without the permission the request needs) or AUTHFAILED (credentials the
// server rejected). See docs/design/security-zookeeper.md.
func unauthorized(err error) error {
	if err == nil || errors.Is(err, locker.ErrUnauthorized) {
		return err
	}
	if errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed) {
		return fmt.Errorf("%w: %w", locker.ErrUnauthorized, err)
	}
	return err
}

// authenticate adds the digest identity user to the session (go-zookeeper
// sends it again on every later session before any other request), then
// makes sure the root exists and that the identity may read it.
//
// ZooKeeper accepts any digest: a wrong password is only another identity,
// refused by the ACLs of nodes the right one created. Reading the root is
// what Open can check: a root created with this identity's ACL (by an Open
// with the right password) refuses a wrong one here; a root readable by
// anyone cannot tell, and a wrong password then shows up as
// ErrUnauthorized on the first lock of a key the right identity created.
func (b *backend) authenticate(ctx context.Context, user, password string) error {
	err := b.do(ctx, func() error { return b.conn.AddAuth("digest", []byte(user+":"+password)) })
	if err != nil {
		return unauthorized(fmt.Errorf("digest authentication as %q: %w", user, err))
	}
	err = b.do(ctx, func() error {
		if err := b.ensureRoot(); err != nil {
			return err
		}
		_, _, err := b.conn.Get(b.root)
		return err
	})
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w: digest identity %q may not read the root %s (a wrong password, or a root that belongs to another identity): %w",
			locker.ErrUnauthorized, user, b.root, err)
	}
	return unauthorized(err)
}

// ensureRoot creates the root and its missing parents, persistent, with
// the Locker's ACL. Existing nodes are passed over without a create, which
// an ACL may refuse even for a node that exists.
func (b *backend) ensureRoot() error {
	segs := strings.Split(b.root[1:], "/")
	for i := range segs {
		p := "/" + strings.Join(segs[:i+1], "/")
		ok, _, err := b.conn.Exists(p)
		if err != nil {
			return fmt.Errorf("root node %s: %w", p, err)
		}
		if ok {
			continue
		}
		if _, err := b.conn.Create(p, nil, zk.FlagPersistent, b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create root node %s: %w", p, err)
		}
	}
	return nil
}

// redact hides secret in a log line from go-zookeeper. None of its lines
// carries the credentials today; this keeps it so.
func redact(line, secret string) string {
	if secret == "" {
		return line
	}
	return strings.ReplaceAll(line, secret, "[redacted]")
}

// tlsDialer returns a dialer that connects with base (nil: net.DialTimeout)
// and, when conf is not nil, runs a TLS handshake over the connection within
// the same timeout. An empty conf.ServerName is the host dialled.
func tlsDialer(base zk.Dialer, conf *tls.Config) zk.Dialer {
	if base == nil {
		base = net.DialTimeout
	}
	if conf == nil {
		return base
	}
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		deadline := time.Now().Add(timeout)
		raw, err := base(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		c := conf
		if c.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c = conf.Clone()
				c.ServerName = host
			}
		}
		tc := tls.Client(raw, c)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}
