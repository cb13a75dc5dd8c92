package redis

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// seen is what one server knows of a lock (inspect.lua), read in one step.
type seen struct {
	holder  string // the owner value ("" when free)
	pttl    time.Duration
	token   uint64 // the fence
	granted time.Time
	value   string // the published value
	waiters int    // live queue entries
}

// held reports whether the lock is held by an owner: not free, and not the
// placeholder a clean-up sets ("~" + an owner value) to keep a late acquire
// of unknown outcome out, which no owner holds.
func (s seen) held() bool { return s.holder != "" && !strings.HasPrefix(s.holder, "~") }

// info is s as a LockInfo of key; waiters is what to report as Waiters.
func (s seen) info(key string, waiters int) driver.LockInfo {
	if !s.held() {
		return driver.LockInfo{Key: key, Waiters: waiters}
	}
	// The owner value is the owner id, a space and the label: the id is the
	// capability to release the lock and is never shown.
	_, label, _ := strings.Cut(ownerValue(s.holder), " ")
	return driver.LockInfo{Key: key, Held: true, Label: label, Token: s.token, Granted: s.granted,
		TTL: s.pttl, Waiters: waiters, Value: s.value}
}

// inspectKeys are inspect.lua's keys.
func (n names) inspectKeys() []string {
	return []string{n.lock, n.fence, n.queue, n.deadlines, n.sem, n.sinfo}
}

// readSeen parses inspect.lua's reply.
func readSeen(v any, err error) (seen, error) {
	if err != nil {
		return seen{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return seen{}, fmt.Errorf("redis: unexpected inspect reply %v", v)
	}
	str := func(i int) string { s, _ := a[i].(string); return s }
	num := func(i int) int64 {
		switch x := a[i].(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	s := seen{holder: str(0), pttl: time.Duration(num(1)) * time.Millisecond, value: str(4), waiters: int(num(5))}
	s.token, _ = strconv.ParseUint(str(2), 10, 64)
	if g := num(3); g > 0 {
		s.granted = time.UnixMicro(g)
	}
	return s, nil
}

// Inspect implements driver.Inspector: inspect.lua reads the lock, its
// fence and queue in one step, so the view is consistent.
func (b *backend) Inspect(ctx context.Context, key string) (_ driver.LockInfo, err error) {
	defer refusedTo(&err)
	n := b.names(key)
	s, err := readSeen(inspectScript.Run(ctx, b.client, n.inspectKeys()).Result())
	if err != nil {
		return driver.LockInfo{}, err
	}
	return s.info(key, s.waiters), nil
}

// inspectAll runs inspect.lua for every key in one pipeline on c. A server
// that has not cached the script yet is sent it once (Run) first.
func inspectAll(ctx context.Context, c goredis.UniversalClient, all []names) ([]seen, error) {
	out := make([]seen, len(all))
	if len(all) == 0 {
		return out, nil
	}
	var err error
	if out[0], err = readSeen(inspectScript.Run(ctx, c, all[0].inspectKeys()).Result()); err != nil {
		return nil, err
	}
	cmds, _ := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, n := range all[1:] {
			inspectScript.EvalSha(ctx, p, n.inspectKeys())
		}
		return nil
	})
	for i, cmd := range cmds {
		v, err := cmd.(*goredis.Cmd).Result()
		if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = inspectScript.Run(ctx, c, all[i+1].inspectKeys()).Result()
		}
		if out[i+1], err = readSeen(v, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listCursor is where a List goes on: the node (its address on a Cluster,
// its index for Redlock, "" for a single server), its SCAN cursor, the
// last lock key returned from that SCAN batch (a batch may hold more locks
// than a page: the rest follow it), and, for Redlock, how many masters
// could not be scanned so far.
type listCursor struct {
	node   string
	scan   uint64
	after  string
	failed int
}

func (c listCursor) String() string {
	return strings.Join([]string{c.node, strconv.FormatUint(c.scan, 10),
		base64.RawURLEncoding.EncodeToString([]byte(c.after)), strconv.Itoa(c.failed)}, "|")
}

func parseCursor(s string) (listCursor, error) {
	if s == "" {
		return listCursor{}, nil
	}
	f := strings.Split(s, "|")
	if len(f) != 4 {
		return listCursor{}, fmt.Errorf("redis: malformed list cursor %q", s)
	}
	scan, err1 := strconv.ParseUint(f[1], 10, 64)
	after, err2 := base64.RawURLEncoding.DecodeString(f[2])
	failed, err3 := strconv.Atoi(f[3])
	if err := errors.Join(err1, err2, err3); err != nil {
		return listCursor{}, fmt.Errorf("redis: malformed list cursor %q: %w", s, err)
	}
	return listCursor{node: f[0], scan: scan, after: string(after), failed: failed}, nil
}

// globEscape escapes the glob metacharacters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lockPattern is the SCAN MATCH pattern of the lock keys whose stored keys
// may start with prefix: base64url encodes 3 bytes to 4 characters, each
// group on its own, so the encoding of prefix's first whole groups starts
// the encoding of every key that starts with prefix (scanBatch checks the
// rest). Base64url has no glob metacharacter.
func (b *base) lockPattern(prefix string) string {
	whole := prefix[:len(prefix)/3*3]
	return globEscape(b.prefix) + "{" + encodeKey(whole) + "*}:lock"
}

// scanBatch runs one SCAN on c from cur and returns the names of the locks
// it found whose keys start with prefix, after cur.after, in name order, at
// most limit of them; and the cursor to go on from. Work is bounded by
// limit: SCAN's COUNT.
func (b *base) scanBatch(ctx context.Context, c goredis.UniversalClient, cur listCursor, prefix string, limit int) ([]string, []names, listCursor, error) {
	found, scan, err := c.Scan(ctx, cur.scan, b.lockPattern(prefix), int64(limit)).Result()
	if err != nil {
		return nil, nil, cur, err
	}
	var keys []string
	for _, name := range found {
		tag, ok := strings.CutPrefix(name, b.prefix+"{")
		tag, ok2 := strings.CutSuffix(tag, "}:lock")
		k, err := base64.RawURLEncoding.DecodeString(tag)
		if ok && ok2 && err == nil && strings.HasPrefix(string(k), prefix) && (cur.after == "" || name > cur.after) {
			keys = append(keys, string(k))
		}
	}
	slices.SortFunc(keys, func(x, y string) int { return cmp.Compare(b.names(x).lock, b.names(y).lock) })
	next := listCursor{node: cur.node, scan: scan, failed: cur.failed}
	if len(keys) > limit {
		keys = keys[:limit]
		next = listCursor{node: cur.node, scan: cur.scan, after: b.names(keys[limit-1]).lock, failed: cur.failed}
	}
	all := make([]names, len(keys))
	for i, k := range keys {
		all[i] = b.names(k)
	}
	return keys, all, next, nil
}

// scanNode is one server to scan: a Cluster's master, or the one server.
type scanNode struct {
	addr   string
	client goredis.UniversalClient
}

// scanNodes returns the servers that hold b's keys, in address order: on a
// Cluster every master (SCAN runs on one node), else the one deployment.
func (b *backend) scanNodes(ctx context.Context) ([]scanNode, error) {
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok {
		return []scanNode{{client: b.client}}, nil
	}
	var mu sync.Mutex
	var nodes []scanNode
	err := cc.ForEachMaster(ctx, func(_ context.Context, m *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, scanNode{addr: m.Options().Addr, client: m})
		return nil
	})
	slices.SortFunc(nodes, func(x, y scanNode) int { return cmp.Compare(x.addr, y.addr) })
	return nodes, err
}

// List implements driver.Inspector with SCAN MATCH over the lock keys, one
// batch (COUNT limit) per call; on a Cluster over every master in turn,
// the cursor naming the master and its SCAN cursor. A master that left
// (failover) is skipped for the next one in address order. Like SCAN, a
// lock held throughout the listing is listed; one taken or freed meanwhile
// may or may not be; one may be listed twice (the server resized its key
// table between two calls).
func (b *backend) List(ctx context.Context, prefix, cursor string, limit int) (_ []driver.LockInfo, _ string, err error) {
	defer refusedTo(&err)
	cur, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	nodes, err := b.scanNodes(ctx)
	if err != nil {
		return nil, "", err
	}
	i, _ := slices.BinarySearchFunc(nodes, cur.node, func(n scanNode, addr string) int { return cmp.Compare(n.addr, addr) })
	if i == len(nodes) {
		return nil, "", nil
	}
	if nodes[i].addr != cur.node {
		cur = listCursor{node: nodes[i].addr}
	}
	keys, all, next, err := b.scanBatch(ctx, nodes[i].client, cur, prefix, limit)
	if err != nil {
		return nil, "", err
	}
	// Through the deployment's client, not the node's: a Cluster client
	// follows a slot that moved.
	seen, err := inspectAll(ctx, b.client, all)
	if err != nil {
		return nil, "", err
	}
	var locks []driver.LockInfo
	for j, s := range seen {
		if s.held() {
			locks = append(locks, s.info(keys[j], s.waiters))
		}
	}
	switch {
	case next.scan != 0 || next.after != "":
	case i+1 < len(nodes):
		next = listCursor{node: nodes[i+1].addr}
	default:
		return locks, "", nil
	}
	return locks, next.String(), nil
}
