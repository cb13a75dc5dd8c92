package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	goredis "github.com/redis/go-redis/v9"
)

//go:embed permit_guard.lua
var permitGuardLua string

var permitGuardScript = goredis.NewScript(clockLua + permitGuardLua)

// PermitGuard writes a value only from a permit (or lock) that Redis still
// holds, for Lockers made by New (a server, Sentinel or Cluster; not
// Redlock, whose permits do not exist and whose locks live on several
// masters). Write checks, in one script with the write, that the permit
// granted the token is in the lock's permits and unexpired by the server's
// clock — for a plain lock, that the lock is held and its last grant was
// that token — so a released or expired permit writes nothing. It fits
// N-permit locks, which a fence keeping the highest token does not (see
// package fencing). The value lives beside the lock, in its hash slot.
type PermitGuard struct {
	client goredis.UniversalClient
	base   base
}

// A PermitGuardOption configures NewPermitGuard.
type PermitGuardOption func(*permitGuardConfig)

type permitGuardConfig struct{ prefix string }

// WithPermitGuardPrefix names the key prefix of the Lockers whose permits
// the guard checks (their WithPrefix; default DefaultPrefix).
func WithPermitGuardPrefix(p string) PermitGuardOption {
	return func(c *permitGuardConfig) { c.prefix = p }
}

// NewPermitGuard returns a PermitGuard over client. The client stays the
// caller's.
func NewPermitGuard(client goredis.UniversalClient, opts ...PermitGuardOption) (*PermitGuard, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
	}
	cfg := permitGuardConfig{prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := checkLockerPrefix(cfg.prefix); err != nil {
		return nil, err
	}
	return &PermitGuard{client: client, base: base{prefix: cfg.prefix}}, nil
}

// valueKey is the name of the value the guard keeps for key's lock.
func (g *PermitGuard) valueKey(n names) string { return g.base.prefix + "{" + n.tag + "}:pv" }

// Write stores value as key's guarded value if the permit of key granted
// with token is held now; otherwise it writes nothing and the error wraps
// fencing.ErrStaleToken. key is the stored key: with a namespace ns, ns +
// "\x00" + key. Held means held on the server, which a permit released
// inside its minimum hold still is, to the hold's end.
func (g *PermitGuard) Write(ctx context.Context, key string, token uint64, value string) error {
	n := g.base.names(key)
	ok, err := permitGuardScript.Run(ctx, g.client, []string{n.lock, n.fence, n.sem, n.sinfo, g.valueKey(n)},
		strconv.FormatUint(token, 10), value).Int64()
	if err != nil {
		return fmt.Errorf("redis permit guard: %q: %w", key, err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: key %q: permit %d is not held", fencing.ErrStaleToken, key, token)
	}
	return nil
}

// Get returns key's guarded value; found is false when none was written.
func (g *PermitGuard) Get(ctx context.Context, key string) (value string, found bool, err error) {
	value, err = g.client.Get(ctx, g.valueKey(g.base.names(key))).Result()
	switch {
	case err == goredis.Nil:
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("redis permit guard: get %q: %w", key, err)
	}
	return value, true, nil
}
