package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// PermitGuard admits a write only from a permit (or lock) that ZooKeeper
// still holds: the permit is its holder's ephemeral node in the lock's
// directory, whose czxid is the token, and Write applies the writer's ops
// in a multi that first checks that node exists. A released permit's node
// is deleted, a lost one's with its session, and a node's name is never
// made again, so the multi of a permit that ended applies nothing. It fits
// N-permit locks, which a fence keeping the highest token does not (see
// package fencing).
type PermitGuard struct {
	conn *zk.Conn
	root string
}

// A PermitGuardOption configures NewPermitGuard.
type PermitGuardOption func(*PermitGuard)

// WithPermitGuardRoot names the root of the Lockers whose permits the
// guard checks (their WithRoot; default DefaultRoot).
func WithPermitGuardRoot(root string) PermitGuardOption {
	return func(g *PermitGuard) { g.root = root }
}

// NewPermitGuard returns a PermitGuard over conn, which the caller owns.
func NewPermitGuard(conn *zk.Conn, opts ...PermitGuardOption) (*PermitGuard, error) {
	if conn == nil {
		return nil, fmt.Errorf("zookeeper: permit guard: %w: nil *zk.Conn", locker.ErrInvalidOption)
	}
	g := &PermitGuard{conn: conn, root: DefaultRoot}
	for _, o := range opts {
		if o != nil {
			o(g)
		}
	}
	if err := validateRoot(g.root); err != nil {
		return nil, fmt.Errorf("zookeeper: permit guard: %w: root %q: %v", locker.ErrInvalidOption, g.root, err)
	}
	g.root = strings.TrimSuffix(g.root, "/")
	return g, nil
}

// Write applies ops (*zk.CreateRequest, *zk.SetDataRequest,
// *zk.DeleteRequest or *zk.CheckVersionRequest) in one multi only if the
// permit of key granted with token is held then; otherwise nothing is
// applied and the error wraps fencing.ErrStaleToken. key is the stored
// key: with a namespace ns, ns + "\x00" + key. Finding the permit's node
// reads the lock's children and their stats (the holders come first). It
// returns the responses to ops. ctx is checked before each call, as for
// Guard.
//
// Held means the node exists on the server: a crashed holder's node stays
// until its session expires.
func (g *PermitGuard) Write(ctx context.Context, key string, token uint64, ops ...any) ([]zk.MultiResponse, error) {
	stale := fmt.Errorf("%w: key %q: permit %d is not held", fencing.ErrStaleToken, key, token)
	dir := (&backend{root: g.root}).dir(key)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	names, _, err := g.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, stale
	} else if err != nil {
		return nil, fmt.Errorf("zookeeper: permit guard: %q: %w", key, err)
	}
	own := ""
	for _, c := range parseChildren(names) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ok, st, err := g.conn.Exists(dir + "/" + c.name)
		if err != nil {
			return nil, fmt.Errorf("zookeeper: permit guard: %q: %w", key, err)
		}
		if ok && token != 0 && uint64(st.Czxid) == token {
			own = dir + "/" + c.name
			break
		}
	}
	if own == "" {
		return nil, stale
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := g.conn.Multi(append([]any{&zk.CheckVersionRequest{Path: own, Version: -1}}, ops...)...)
	if err == nil {
		return res[1:], nil
	}
	if len(res) > 0 && errors.Is(res[0].Error, zk.ErrNoNode) {
		return nil, stale
	}
	return res, err
}
