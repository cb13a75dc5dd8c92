package zookeeper

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// Guard is a fencing.Guard for state kept in ZooKeeper. For each resource it
// keeps the highest admitted token in a node (8 bytes, big-endian) under its
// root, and admits an operation only in the same multi transaction that
// checks that node's version and records the token, so no write with a lower
// token can slip in between the check and the write.
type Guard struct {
	conn *zk.Conn
	root string
	acl  []zk.ACL
}

var _ fencing.Guard = (*Guard)(nil)

// DefaultGuardRoot is the node under which a Guard keeps its token nodes.
const DefaultGuardRoot = "/locker-fences"

// A GuardOption configures NewGuard.
type GuardOption func(*Guard)

// WithGuardRoot sets the absolute path under which the Guard keeps its token
// nodes (default DefaultGuardRoot; created on first use).
func WithGuardRoot(root string) GuardOption { return func(g *Guard) { g.root = root } }

// WithGuardACL sets the ACL of the nodes the Guard creates (default: all
// rights to anyone).
func WithGuardACL(acl []zk.ACL) GuardOption { return func(g *Guard) { g.acl = acl } }

// NewGuard returns a Guard over conn, which the caller owns.
func NewGuard(conn *zk.Conn, opts ...GuardOption) (*Guard, error) {
	if conn == nil {
		return nil, fmt.Errorf("zookeeper: guard: %w: nil *zk.Conn", locker.ErrInvalidOption)
	}
	g := &Guard{conn: conn, root: DefaultGuardRoot}
	for _, o := range opts {
		if o != nil {
			o(g)
		}
	}
	if err := validateRoot(g.root); err != nil {
		return nil, fmt.Errorf("zookeeper: guard: %w: root %q: %v", locker.ErrInvalidOption, g.root, err)
	}
	if len(g.acl) == 0 {
		g.acl = zk.WorldACL(zk.PermAll)
	}
	return g, nil
}

// Admit implements fencing.Guard.
func (g *Guard) Admit(ctx context.Context, resource string, token uint64) error {
	_, err := g.Write(ctx, resource, token)
	return err
}

// Write admits token for resource and, in the same transaction, applies ops
// (*zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or
// *zk.CheckVersionRequest: the writes the lock protects). Either the token is
// admitted and every op applied, or nothing changes: a stale token returns an
// error wrapping fencing.ErrStaleToken. It returns the responses to ops.
// go-zookeeper's calls take no context: ctx is checked before each attempt,
// and a call in flight runs until ZooKeeper answers or the connection fails.
func (g *Guard) Write(ctx context.Context, resource string, token uint64, ops ...any) ([]zk.MultiResponse, error) {
	res, err := g.write(ctx, resource, token, ops...)
	return res, unauthorized(err)
}

func (g *Guard) write(ctx context.Context, resource string, token uint64, ops ...any) ([]zk.MultiResponse, error) {
	if token == 0 {
		return nil, fmt.Errorf("%w: resource %q: token 0 is never issued", fencing.ErrStaleToken, resource)
	}
	p := g.root + "/" + base64.RawURLEncoding.EncodeToString([]byte(resource))
	val := binary.BigEndian.AppendUint64(nil, token)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, st, err := g.conn.Get(p)
		var first any
		switch {
		case errors.Is(err, zk.ErrNoNode):
			if err := g.ensureRoot(); err != nil {
				return nil, err
			}
			first = &zk.CreateRequest{Path: p, Data: val, Acl: g.acl, Flags: zk.FlagPersistent}
		case err != nil:
			return nil, err
		case len(data) != 8:
			return nil, fmt.Errorf("zookeeper: guard node %s holds %d bytes, not a token", p, len(data))
		default:
			if h := binary.BigEndian.Uint64(data); token < h {
				return nil, fmt.Errorf("%w: resource %q: token %d, already admitted %d", fencing.ErrStaleToken, resource, token, h)
			}
			// Conditional on the version read: a concurrent admission in
			// between makes the whole transaction fail, and we read again.
			first = &zk.SetDataRequest{Path: p, Data: val, Version: st.Version}
		}
		res, err := g.conn.Multi(append([]any{first}, ops...)...)
		if err == nil {
			return res[1:], nil
		}
		if len(res) > 0 && (errors.Is(res[0].Error, zk.ErrBadVersion) || errors.Is(res[0].Error, zk.ErrNodeExists)) {
			continue // lost a race with another admission: read again
		}
		return res, err
	}
}

func (g *Guard) ensureRoot() error {
	for i := 1; i <= len(g.root); i++ {
		if i == len(g.root) || g.root[i] == '/' {
			if _, err := g.conn.Create(g.root[:i], nil, zk.FlagPersistent, g.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return fmt.Errorf("zookeeper: guard root %s: %w", g.root[:i], err)
			}
		}
	}
	return nil
}
