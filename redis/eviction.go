package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/distlock/locker"
	goredis "github.com/redis/go-redis/v9"
)

// evictionCheck looks at a deployment's maxmemory-policy before the first
// request of a Locker or Guard, and refuses a policy that evicts keys
// (allkeys-*, volatile-*) unless accepted: an evicted lock key is a lock
// granted twice, an evicted fence key a token forgotten. The answer is
// kept; an unreachable server is asked again by the next request.
type evictionCheck struct {
	accept bool
	logger *slog.Logger
	ok     atomic.Bool           // checked: nothing to refuse
	refuse atomic.Pointer[error] // checked: the error every request gets
}

func (e *evictionCheck) check(ctx context.Context, c goredis.UniversalClient) error {
	// Accepted: whatever the policy, the answer is to go on, so the server
	// is not asked. A lock user may not read it, and each refused CONFIG
	// GET would be an entry in the server's ACL LOG, where operators look
	// for intrusions.
	if e.accept || e.ok.Load() {
		return nil
	}
	if err := e.refuse.Load(); err != nil {
		return *err
	}
	policy, err := evictionPolicy(ctx, c)
	var reply goredis.Error
	switch {
	case goredis.HasErrorPrefix(err, "NOPERM"):
		// An ACL denies CONFIG GET, as it should a lock user's (CONFIG GET
		// also reads requirepass): the operator who restricted it says
		// whether the policy is safe. Not kept: a grant may come later.
		return fmt.Errorf("%w: %w (reading maxmemory-policy needs +config|get; or, with maxmemory-policy noeviction, accept it with accept_eviction=true or WithAcceptEviction(true))",
			locker.ErrUnauthorized, err)
	case isRefusal(err):
		return err // the credentials: not the check's to judge
	case errors.As(err, &reply):
		// CONFIG is refused (managed services rename or forbid it): the
		// policy cannot be known. Say so once, and go on.
		e.logger.Warn("redis: cannot read maxmemory-policy; make sure it is noeviction (an evicted lock is granted twice)", "error", err)
	case err != nil:
		return err
	case policy != "":
		err := fmt.Errorf("%w: %w: maxmemory-policy is %s (use noeviction, or accept it with WithAcceptEviction)",
			locker.ErrInvalidOption, ErrEvictingPolicy, policy)
		e.refuse.Store(&err)
		return err
	}
	e.ok.Store(true)
	return nil
}

// evictionPolicy returns the first evicting maxmemory-policy of the
// deployment's masters, or "".
func evictionPolicy(ctx context.Context, c goredis.UniversalClient) (string, error) {
	one := func(ctx context.Context, c goredis.Cmdable) (string, error) {
		m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			return "", err
		}
		p := m["maxmemory-policy"]
		if strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-") {
			return p, nil
		}
		return "", nil
	}
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		return one(ctx, c)
	}
	var found atomic.Pointer[string]
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		p, err := one(ctx, m)
		if p != "" {
			found.Store(&p)
		}
		return err
	})
	if p := found.Load(); p != nil {
		return *p, nil
	}
	return "", err
}

var discardLogger = slog.New(slog.DiscardHandler)
