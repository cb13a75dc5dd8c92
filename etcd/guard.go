package etcd

import (
	"context"
	"fmt"
	"strconv"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultGuardPrefix is the etcd key prefix under which a Guard records the
// highest admitted token of each resource, when NewGuard is given "".
const DefaultGuardPrefix = "locker-fence/"

// Guard is a fencing.Guard for state kept in etcd. For each resource it
// records the highest token admitted so far under one key, and admits a
// write only in a txn that compares that record with the writer's token: the
// check, the new record and the writer's own operations commit together or
// not at all, so no stale holder's write can land between a check and a
// write. It is safe for concurrent use.
type Guard struct {
	cli    *clientv3.Client
	prefix string
}

var _ fencing.Guard = (*Guard)(nil)

// A GuardOption configures a Guard.
type GuardOption func(*Guard)

// WithGuardPrefix sets the etcd key prefix under which a Guard records the
// highest admitted token of each resource (default DefaultGuardPrefix; a
// '/' is appended when missing, so Guards with different prefixes never
// share a record). A prefix holding NUL is refused.
func WithGuardPrefix(prefix string) GuardOption {
	return func(g *Guard) { g.prefix = prefix }
}

// NewGuard returns a Guard over cli, which the caller owns. A nil client or
// a bad option is refused with an error wrapping locker.ErrInvalidOption.
func NewGuard(cli *clientv3.Client, opts ...GuardOption) (*Guard, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd guard: nil client", locker.ErrInvalidOption)
	}
	g := &Guard{cli: cli, prefix: DefaultGuardPrefix}
	for _, opt := range opts {
		opt(g)
	}
	var err error
	if g.prefix, err = checkPrefix(g.prefix, DefaultGuardPrefix); err != nil {
		return nil, err
	}
	return g, nil
}

// encodeToken writes a token as 20 decimal digits, so that etcd's byte-wise
// value comparison orders tokens numerically.
func encodeToken(token uint64) string {
	return fmt.Sprintf("%020d", token)
}

// recordKey is the key holding resource's highest admitted token. The
// resource is escaped like a lock key, so that distinct resources never
// share a record.
func (g *Guard) recordKey(resource string) string {
	return g.prefix + escape(resource)
}

// Admit implements fencing.Guard: it records token for resource if it is at
// least the highest token recorded, and otherwise returns an error wrapping
// fencing.ErrStaleToken. Token 0 is never issued by a lock and is refused.
func (g *Guard) Admit(ctx context.Context, resource string, token uint64) error {
	_, err := g.Write(ctx, resource, token)
	return err
}

// Write admits token for resource and, in the same txn, applies ops (the
// writer's puts and deletes on the guarded state). If token is lower than the
// highest recorded, nothing is applied and the error wraps
// fencing.ErrStaleToken. On success it returns the txn's response:
// Responses[0] answers the record's update, and ops' answers follow in order.
func (g *Guard) Write(ctx context.Context, resource string, token uint64, ops ...clientv3.Op) (_ *clientv3.TxnResponse, err error) {
	defer markRefusals(&err)
	if token == 0 {
		return nil, fmt.Errorf("%w: resource %q: token 0 is never issued", fencing.ErrStaleToken, resource)
	}
	key, enc := g.recordKey(resource), encodeToken(token)
	// A missing record fails a value comparison, so the txn asks the
	// opposite question: is the recorded token higher than ours? Then the
	// write is stale; otherwise (lower, equal or no record) it is admitted.
	resp, err := g.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), ">", enc)).
		Then(clientv3.OpGet(key)).
		Else(append([]clientv3.Op{clientv3.OpPut(key, enc)}, ops...)...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd guard: resource %q: %w", resource, err)
	}
	if resp.Succeeded {
		highest := "?"
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if n, err := strconv.ParseUint(string(kvs[0].Value), 10, 64); err == nil {
				highest = strconv.FormatUint(n, 10)
			}
		}
		return nil, fmt.Errorf("%w: resource %q: token %d, already admitted %s", fencing.ErrStaleToken, resource, token, highest)
	}
	return resp, nil
}

// Highest returns the highest token admitted for resource (0 if none).
func (g *Guard) Highest(ctx context.Context, resource string) (_ uint64, err error) {
	defer markRefusals(&err)
	resp, err := g.cli.Get(ctx, g.recordKey(resource))
	if err != nil {
		return 0, fmt.Errorf("etcd guard: resource %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd guard: resource %q: record %q is not a token", resource, resp.Kvs[0].Value)
	}
	return n, nil
}
