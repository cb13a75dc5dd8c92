package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// Permits implements driver.Permits: New's Lockers take N-permit locks
// natively (permit.lua). Redlock does not: see the package doc.
func (b *backend) Permits() {}

// MinHolds implements driver.MinHolds, for locks and permits.
func (b *backend) MinHolds() {}

// holdArg is a request's minimum hold as the scripts' argument: whole ms,
// or nil for none.
func holdArg(req *driver.Request) any {
	if req.MinHold <= 0 {
		return nil
	}
	return holdMillis(req.MinHold)
}

// limitMismatch is the error of an acquisition whose limit is not the one
// stored with the key.
func limitMismatch(stored string, asked int) error {
	return fmt.Errorf("%w: redis: the key admits %s holders at once, this acquisition asks for %d", locker.ErrInvalidOption, stored, max(asked, 1))
}

var errPermitValue = fmt.Errorf("%w: redis: a permit of an N-permit lock carries no published value", locker.ErrInvalidOption)

// attemptPermit is attempt for an N-permit lock (req.Limit > 1).
func (b *backend) attemptPermit(ctx context.Context, req *driver.Request, n names, waiter string) (driver.Lock, time.Duration, error) {
	if req.Value != "" {
		return nil, 0, errPermitValue
	}
	start := time.Now()
	val := value(req)
	keys := []string{n.lock, n.fence, n.sem, n.sinfo}
	args := []any{val, serverTTL(req), req.Limit}
	if waiter != "" {
		keys = append(keys, n.queue, n.deadlines)
		args = append(args, b.wakeArg, waiter, staleAfter(req.TTL), waiterLiveness.Milliseconds())
	}
	v, err := permitScript.Run(ctx, b.client, keys, args...).Result()
	if err != nil {
		if outcomeUnknown(err) {
			p := &permit{b: b, n: n, val: val}
			_, _ = settle(ctx, p.release)
		}
		return nil, 0, err
	}
	if token, ok := v.(int64); ok {
		return &permit{b: b, n: n, val: val, token: token, start: start, minHold: holdArg(req)}, 0, nil
	}
	if a, _ := v.([]any); len(a) == 2 {
		flag, ok1 := a[0].(int64)
		x, ok2 := a[1].(int64)
		switch {
		case !ok1 || !ok2:
		case flag == -1:
			return nil, 0, limitMismatch(fmt.Sprint(x), req.Limit)
		case flag == 0:
			return nil, time.Duration(max(x, 0)) * time.Millisecond, nil
		}
	}
	return nil, 0, fmt.Errorf("redis: unexpected script reply %v", v)
}

// permit is one permit of an N-permit lock on one deployment.
type permit struct {
	b       *backend
	n       names
	val     string
	token   int64 // 0 for the clean-up of an acquisition whose outcome is unknown
	start   time.Time
	minHold any // as lock.minHold
}

func (p *permit) Token() uint64    { return uint64(p.token) }
func (p *permit) Start() time.Time { return p.start }

// hold is the minimum hold as the permit scripts take it: "" for none.
func (p *permit) hold() any {
	if p.minHold == nil {
		return ""
	}
	return p.minHold
}

func (p *permit) Refresh(ctx context.Context, ttl time.Duration) (err error) {
	defer refusedTo(&err)
	n, err := permitRefreshScript.Run(ctx, p.b.client, []string{p.n.lock, p.n.sem, p.n.sinfo}, p.val, ttlMillis(ttl), p.hold()).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}

// release runs permit_release.lua once; it is safe to repeat.
func (p *permit) release(ctx context.Context) (int64, error) {
	token := any("")
	if p.token > 0 {
		token = p.token
	}
	return permitReleaseScript.Run(ctx, p.b.client,
		[]string{p.n.lock, p.n.queue, p.n.deadlines, p.n.sem, p.n.sinfo, p.n.fence},
		p.val, p.b.wakeArg, token, p.hold()).Int64()
}

func (p *permit) Release(ctx context.Context) (err error) {
	defer refusedTo(&err)
	n, err := p.release(ctx)
	if err != nil && outcomeUnknown(err) {
		n, err = settle(ctx, p.release)
	}
	if err != nil {
		return err
	}
	if n != 1 {
		return locker.ErrLeaseLost
	}
	return nil
}

var errPermitPublish = errors.New("a permit of an N-permit lock carries no published value")
