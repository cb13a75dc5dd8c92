package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	goredis "github.com/redis/go-redis/v9"
)

// Guard is a fencing.Guard whose state lives in Redis, for resources kept in
// Redis: Write admits a token and writes a value in one script, so no write
// carrying a lower token can land between the check and the write, whatever
// the number of writers and processes. It works on a single server, a
// Sentinel master or a Cluster (a resource's fence and value share a slot).
//
// A Guard is as durable as the server's data: a restart without persistence
// forgets the highest token and the values alike.
type Guard struct {
	client   goredis.UniversalClient
	prefix   string
	eviction evictionCheck
}

var _ fencing.Guard = (*Guard)(nil)

// A GuardOption configures NewGuard.
type GuardOption func(*guardConfig)

type guardConfig struct {
	prefix         string
	acceptEviction bool
}

// WithGuardAcceptEviction(true) lets a Guard run on a server whose
// maxmemory-policy may evict its keys (see WithAcceptEviction): an evicted
// fence forgets the highest token admitted.
func WithGuardAcceptEviction(accept bool) GuardOption {
	return func(c *guardConfig) { c.acceptEviction = accept }
}

// WithGuardPrefix starts the guard's key names with p instead of
// DefaultPrefix. p may not contain '{' or '}'.
func WithGuardPrefix(p string) GuardOption { return func(c *guardConfig) { c.prefix = p } }

// NewGuard returns a Guard over client. The client stays the caller's.
func NewGuard(client goredis.UniversalClient, opts ...GuardOption) (*Guard, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrInvalidOption, errNoClient)
	}
	cfg := guardConfig{prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := checkPrefix(cfg.prefix); err != nil {
		return nil, err
	}
	return &Guard{client: client, prefix: cfg.prefix, eviction: evictionCheck{accept: cfg.acceptEviction, logger: discardLogger}}, nil
}

// guardNames are the keys of one guarded resource: the highest admitted
// token, and the value written under the guard.
func (g *Guard) names(resource string) (fence, val string) {
	p := g.prefix + guardSpace + "{" + encodeKey(resource) + "}"
	return p + ":fence", p + ":value"
}

// Admit implements fencing.Guard: it records token as the highest admitted
// for resource, or returns an error wrapping fencing.ErrStaleToken when a
// higher token was admitted before. Token 0 is never issued and is refused.
func (g *Guard) Admit(ctx context.Context, resource string, token uint64) error {
	return g.run(ctx, resource, token, false, "")
}

// Write admits token for resource and, in the same server-side step, stores
// value as the resource's value. A token lower than the highest admitted is
// refused with an error wrapping fencing.ErrStaleToken, and nothing is
// written.
func (g *Guard) Write(ctx context.Context, resource string, token uint64, value string) error {
	return g.run(ctx, resource, token, true, value)
}

// Get returns the resource's value and the highest token admitted for it;
// found is false when no value was ever set.
func (g *Guard) Get(ctx context.Context, resource string) (value string, highest uint64, found bool, err error) {
	fence, val := g.names(resource)
	vs, err := g.client.MGet(ctx, fence, val).Result()
	if err != nil {
		return "", 0, false, fmt.Errorf("redis guard: get %q: %w", resource, refused(err))
	}
	if s, ok := vs[0].(string); ok {
		if highest, err = strconv.ParseUint(s, 10, 64); err != nil {
			return "", 0, false, fmt.Errorf("redis guard: get %q: fence holds %q", resource, s)
		}
	}
	value, found = vs[1].(string)
	return value, highest, found, nil
}

var errZeroToken = errors.New("token 0 is never issued by a lock")

func (g *Guard) run(ctx context.Context, resource string, token uint64, write bool, value string) (err error) {
	defer refusedTo(&err)
	if token == 0 {
		return fmt.Errorf("%w: resource %q: %w", fencing.ErrStaleToken, resource, errZeroToken)
	}
	if err := g.eviction.check(ctx, g.client); err != nil {
		return fmt.Errorf("redis guard: %q: %w", resource, err)
	}
	fence, val := g.names(resource)
	w := "0"
	if write {
		w = "1"
	}
	r, err := guardScript.Run(ctx, g.client, []string{fence, val}, strconv.FormatUint(token, 10), w, value).Slice()
	if err != nil {
		return fmt.Errorf("redis guard: %q: %w", resource, err)
	}
	if len(r) != 2 {
		return fmt.Errorf("redis guard: %q: unexpected script reply %v", resource, r)
	}
	if ok, _ := r[0].(int64); ok != 1 {
		return fmt.Errorf("%w: resource %q: token %d, already admitted %v", fencing.ErrStaleToken, resource, token, r[1])
	}
	return nil
}
