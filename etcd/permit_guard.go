package etcd

import (
	"context"
	"fmt"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PermitGuard admits a write only from a permit (or lock) that etcd still
// holds: the permit is its holder's key under the lock's range, whose
// CreateRevision is the token, and Write applies the writer's ops in a txn
// that compares that key's CreateRevision with the token. A released or
// lost permit has no key (a new key of the same name has a new revision),
// so its txn applies nothing. It fits N-permit locks, which a fence keeping
// the highest token does not (see package fencing). Safe for concurrent
// use.
type PermitGuard struct {
	cli    *clientv3.Client
	prefix string
}

// A PermitGuardOption configures a PermitGuard.
type PermitGuardOption func(*PermitGuard)

// WithPermitGuardPrefix names the key prefix of the Lockers whose permits
// the guard checks (their WithPrefix; default DefaultPrefix).
func WithPermitGuardPrefix(prefix string) PermitGuardOption {
	return func(g *PermitGuard) { g.prefix = prefix }
}

// NewPermitGuard returns a PermitGuard over cli, which the caller owns. A
// nil client or a bad option is refused with an error wrapping
// locker.ErrInvalidOption.
func NewPermitGuard(cli *clientv3.Client, opts ...PermitGuardOption) (*PermitGuard, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd permit guard: nil client", locker.ErrInvalidOption)
	}
	g := &PermitGuard{cli: cli, prefix: DefaultPrefix}
	for _, opt := range opts {
		opt(g)
	}
	var err error
	if g.prefix, err = normalizePrefix(g.prefix); err != nil {
		return nil, err
	}
	return g, nil
}

// Write applies ops (the writer's puts and deletes) in one txn only if the
// permit of key granted with token is held at that revision; otherwise
// nothing is applied and the error wraps fencing.ErrStaleToken. key is the
// stored key: with a namespace ns, ns + "\x00" + key. It costs a range
// read that finds the permit's key and the txn. On success it returns the
// txn's response, ops' answers in order.
//
// Held means etcd still has the key, which may outlast the holder's own
// view: a crashed holder's key stays up to its lease's end, and a key
// released inside its minimum hold stays to the hold's end.
func (g *PermitGuard) Write(ctx context.Context, key string, token uint64, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	stale := func() error {
		return fmt.Errorf("%w: key %q: permit %d is not held", fencing.ErrStaleToken, key, token)
	}
	if token == 0 || token > 1<<63-1 {
		return nil, stale()
	}
	rev := int64(token)
	resp, err := g.cli.Get(ctx, lockPrefix(g.prefix, key), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMinCreateRev(rev), clientv3.WithMaxCreateRev(rev))
	if err != nil {
		return nil, fmt.Errorf("etcd permit guard: key %q: %w", key, err)
	}
	if len(resp.Kvs) != 1 {
		return nil, stale()
	}
	own := string(resp.Kvs[0].Key)
	txn, err := g.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(own), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd permit guard: key %q: %w", key, err)
	}
	if !txn.Succeeded {
		return nil, stale()
	}
	return txn, nil
}
