package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// inspectTimeout bounds a Redlock inspection's request to one master
// (WithNodeTimeout, if set, instead): there is no lease validity to spend,
// and a master that has not answered by then counts as silent.
const inspectTimeout = time.Second

func (r *redlock) inspectTimeout() time.Duration {
	if r.nodeTimeout > 0 {
		return r.nodeTimeout
	}
	return inspectTimeout
}

// view is the majority view of one lock from what each master said (nil:
// it did not answer). The lock is held when a majority of all the masters
// (the quorum) hold it for the same owner value — only one owner can, and
// only then may a lease be valid. Of those masters, the token is the
// largest fence (the round's token, written back to them), Granted the
// quorum-th earliest grant time (when a majority had granted, on their
// clocks), TTL the quorum-th longest PTTL (when fewer than a majority will
// hold it), and Value the value most of them carry. Waiters is -1: each
// master queues at most one acquisition per key and Locker (Acquire lets
// one at a time per key out of a Locker), so its queue does not count
// acquisitions. The second result is the lowest index of those masters. A
// lock held by no majority is free unless its holder's masters and the
// silent ones could make one: then nobody can tell, and it is an error.
func (r *redlock) view(key string, each []*seen) (driver.LockInfo, int, error) {
	silent := 0
	owners := map[string][]int{}
	for i, s := range each {
		switch {
		case s == nil:
			silent++
		case s.held():
			owners[s.holder] = append(owners[s.holder], i)
		}
	}
	if len(each)-silent < r.quorum {
		return driver.LockInfo{}, 0, fmt.Errorf("redlock: %d of %d masters answered, quorum %d", len(each)-silent, len(each), r.quorum)
	}
	for _, on := range owners {
		if len(on)+silent < r.quorum {
			continue
		}
		if len(on) < r.quorum {
			return driver.LockInfo{}, 0, fmt.Errorf("%w: an owner holds %d masters, %d did not answer, quorum %d", errUndecided, len(on), silent, r.quorum)
		}
		var grants []time.Time
		var pttls []time.Duration
		values := map[string]int{}
		s := *each[on[0]]
		for _, i := range on {
			x := each[i]
			s.token = max(s.token, x.token)
			if !x.granted.IsZero() {
				grants = append(grants, x.granted)
			}
			pttls = append(pttls, x.pttl)
			values[x.value]++
			if values[x.value] > values[s.value] {
				s.value = x.value
			}
		}
		slices.SortFunc(grants, time.Time.Compare)
		slices.Sort(pttls)
		s.granted = time.Time{}
		if len(grants) >= r.quorum {
			s.granted = grants[r.quorum-1]
		}
		s.pttl = pttls[len(pttls)-r.quorum]
		return s.info(key, -1), on[0], nil
	}
	return driver.LockInfo{Key: key, Waiters: -1}, -1, nil
}

// inspectEach runs inspect.lua for keys on every master, a pipeline each,
// and returns what each master said of each key (nil where it failed).
func (r *redlock) inspectEach(ctx context.Context, all []names) [][]*seen {
	per := make([][]seen, len(r.nodes))
	r.onAll(ctx, r.inspectTimeout(), func(ctx context.Context, i int, c goredis.UniversalClient) {
		per[i], _ = inspectAll(ctx, c, all)
	})
	out := make([][]*seen, len(all))
	for k := range all {
		out[k] = make([]*seen, len(r.nodes))
		for i := range r.nodes {
			if per[i] != nil {
				out[k][i] = &per[i][k]
			}
		}
	}
	return out
}

// Inspect implements driver.Inspector with the majority view (view): one
// atomic inspect.lua per master, in parallel.
func (r *redlock) Inspect(ctx context.Context, key string) (_ driver.LockInfo, err error) {
	defer r.refusedByQuorum(&err)
	n := r.names(key)
	info, _, err := r.view(key, r.inspectEach(ctx, []names{n})[0])
	return info, err
}

// List implements driver.Inspector: SCAN on every master in turn (the
// cursor names the master by index and carries its SCAN cursor), and the
// majority view of each lock found. A lock held by a majority is listed
// from the first of its masters only, so once; a master that cannot be
// scanned is skipped, as long as no more than a majority can spare fail:
// every majority has a master among the rest.
func (r *redlock) List(ctx context.Context, prefix, cursor string, limit int) (_ []driver.LockInfo, _ string, err error) {
	defer r.refusedByQuorum(&err)
	cur, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	i := 0
	if cur.node != "" {
		if i, err = strconv.Atoi(cur.node); err != nil || i < 0 || i >= len(r.nodes) {
			return nil, "", fmt.Errorf("redis: malformed list cursor %q", cursor)
		}
	}
	cur.node = strconv.Itoa(i)
	sctx, cancel := context.WithTimeout(ctx, r.inspectTimeout())
	keys, all, next, err := r.scanBatch(sctx, r.nodes[i], cur, prefix, limit)
	cancel()
	var locks []driver.LockInfo
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if cur.failed++; cur.failed > len(r.nodes)-r.quorum {
			return nil, "", fmt.Errorf("redlock: list: %d masters could not be scanned, quorum %d: master %d: %w", cur.failed, r.quorum, i, err)
		}
		next = listCursor{failed: cur.failed}
	} else {
		// A lock nobody can tell is held (errUndecided) is not listed.
		for k, each := range r.inspectEach(ctx, all) {
			info, first, err := r.view(keys[k], each)
			switch {
			case err != nil && !errors.Is(err, errUndecided):
				return nil, "", err
			case err == nil && info.Held && first == i:
				locks = append(locks, info)
			}
		}
	}
	if next.scan == 0 && next.after == "" {
		if i+1 == len(r.nodes) {
			return locks, "", nil
		}
		next = listCursor{scan: 0, failed: next.failed}
		i++
	}
	next.node = strconv.Itoa(i)
	return locks, next.String(), nil
}

// errUndecided: a lock's holder and the silent masters could make a
// majority, and the masters that answered cannot tell whether it does.
var errUndecided = errors.New("redlock: cannot tell whether the lock is held")
