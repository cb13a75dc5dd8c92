package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/secretcheck"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// The passwords of the tests' Sentinel deployments: the sentinel's own,
// and the lock user's on the data nodes (the default user's is
// adminPassword).
const (
	sentinelPassword = "sentinel-Secret-41a9"
	sentinelAppPass  = "app-Sentinel-6e2b"
)

// secureSentinel starts a Sentinel deployment with passwords on the
// sentinel and on the data nodes, and makes the lock user app with the
// documented ACL for prefix on both data nodes (ACL users are per node; a
// replica promoted must know them).
func secureSentinel(t *testing.T, prefix string) *testenv.Sentinel {
	t.Helper()
	s := testenv.RedisSentinel(t, launch.SentinelAuth{Data: adminPassword, Sentinel: sentinelPassword})
	for _, a := range s.Nodes() {
		lockUser(t, adminClient(t, a, adminPassword), "app", sentinelAppPass, prefix)
	}
	return s
}

// sentinelURL is the URL of s's master for userinfo ("user:password@"),
// with the sentinel's password sentinelPass ("" for none) and more query.
func sentinelURL(s *testenv.Sentinel, userinfo, sentinelPass, prefix, more string) string {
	q := url.Values{"master_name": {s.MasterName()}, "accept_eviction": {"true"}, "prefix": {prefix}}
	if sentinelPass != "" {
		q.Set("sentinel_password", sentinelPass)
	}
	u := "redis://" + userinfo + s.Addr() + "/0?" + q.Encode()
	if more != "" {
		u += "&" + more
	}
	return u
}

// Sentinel with auth, one deployment for every subtest: the conformance
// suite passes through the sentinel as a user holding exactly the
// documented ACL; by URL, the user info logs in to the data nodes and
// sentinel_password to the sentinel; a wrong password on either is
// ErrUnauthorized; and no password reaches an error, log, span or metric.
func TestConformance_SentinelRestrictedUser(t *testing.T) {
	h := newHarness(nil, false, nil)
	s := secureSentinel(t, h.prefix)
	h.addrs = []string{s.Addr()}
	h.connect = func(addrs []string) []goredis.UniversalClient {
		// One dial per attempt: go-redis's retries nest (each of the
		// master pool's dials asks the sentinels, each through a pool
		// that dials again), so with its defaults an unreachable sentinel
		// keeps a request retrying for seconds and the suite's bound
		// sees the context end rather than ErrUnavailable.
		return []goredis.UniversalClient{goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: s.MasterName(), SentinelAddrs: addrs, SentinelPassword: sentinelPassword,
			Username: "app", Password: sentinelAppPass, ContextTimeoutEnabled: true, DialerRetries: 1})}
	}
	h.opts = []locker.Option{redis.WithAcceptEviction(true)}
	t.Run("conformance", func(t *testing.T) { conformance.Run(t, h) })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("url", func(t *testing.T) {
		openAndLock(ctx, t, sentinelURL(s, "app:"+sentinelAppPass+"@", sentinelPassword, h.prefix, ""))
	})
	t.Run("restricted sentinel user", func(t *testing.T) {
		doc, err := os.ReadFile("../docs/design/security-redis.md")
		if err != nil {
			t.Fatal(err)
		}
		line := regexp.MustCompile(`(?m)^ACL SETUSER locker-sentinel on .*$`).Find(doc)
		if line == nil {
			t.Fatal("docs/design/security-redis.md: no line starting ACL SETUSER locker-sentinel on")
		}
		var words []any
		for _, w := range strings.Fields(strings.Replace(string(line), ">PASSWORD", ">"+sentinelAppPass, 1)) {
			words = append(words, w)
		}
		if err := adminClient(t, s.Addr(), sentinelPassword).Do(ctx, words...).Err(); err != nil {
			t.Fatalf("the documented sentinel line on the sentinel: %v", err)
		}
		openAndLock(ctx, t, sentinelURL(s, "app:"+sentinelAppPass+"@", sentinelAppPass, h.prefix, "sentinel_username=locker-sentinel"))
	})
	t.Run("refused", func(t *testing.T) {
		for _, c := range []struct{ name, userinfo, sentinelPass, code string }{
			{"wrong sentinel password", "app:" + sentinelAppPass + "@", "wrong-Sentinel-0c", "WRONGPASS"},
			{"no sentinel password", "app:" + sentinelAppPass + "@", "", "NOAUTH"},
			{"wrong data password", "app:wrong-Data-77@", sentinelPassword, "WRONGPASS"},
			{"no data password", "", sentinelPassword, "NOAUTH"},
		} {
			l, err := locker.Open(ctx, sentinelURL(s, c.userinfo, c.sentinelPass, h.prefix, ""))
			if err == nil {
				l.Close()
			}
			wantUnauthorized(t, "Open with "+c.name, err, c.code)
		}
	})
	t.Run("secrets", func(t *testing.T) {
		const wrongSentinel, wrongData = "wrong-Sentinel-3f8d", "wrong-Data-a61c"
		r := secretcheck.New()
		opts := append(r.Options(), locker.WithAutoRefresh(false))
		var errs []error
		for _, u := range []string{
			sentinelURL(s, "app:"+sentinelAppPass+"@", wrongSentinel, h.prefix, ""),
			sentinelURL(s, "app:"+wrongData+"@", sentinelPassword, h.prefix, ""),
		} {
			l, err := locker.Open(ctx, u, opts...)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%s) with a wrong password succeeded", redactURL(u))
			}
			errs = append(errs, err)
		}
		l, err := locker.Open(ctx, sentinelURL(s, "app:"+sentinelAppPass+"@", sentinelPassword, h.prefix, ""), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lease, err := l.Acquire(ctx, "secret")
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, lease.Release(ctx), lease.Release(ctx), lease.Refresh(ctx))
		r.Check(t, []string{sentinelAppPass, sentinelPassword, adminPassword, wrongSentinel, wrongData}, errs...)
	})
}

// openAndLock opens u, and takes and releases a lock through it.
func openAndLock(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	l, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%s): %v", redactURL(u), err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "url")
	if err != nil {
		t.Fatalf("Open(%s): TryAcquire: %v", redactURL(u), err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Open(%s): Release: %v", redactURL(u), err)
	}
}

// sentinel_username and sentinel_password need master_name; refused
// elsewhere without repeating the value. Nor does an unreachable sentinel's
// error repeat either password (go-redis dials it again until the context
// ends).
func TestSentinel_URLCredentialsChecked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := locker.Open(ctx, "redis://u:s3cret-d@"+closedAddr(t)+"/0?master_name=m&sentinel_username=s&sentinel_password=s3cret-x")
	if err == nil || !errors.Is(err, locker.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable sentinel = %v, want ErrUnavailable or the deadline, without a password", err)
	}
	for _, u := range []string{
		"redis://127.0.0.1:1/0?sentinel_password=s3cret-x",
		"redis://127.0.0.1:1,127.0.0.1:2/?sentinel_username=u&sentinel_password=s3cret-x",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?sentinel_password=s3cret-x",
	} {
		_, err := locker.Open(ctx, u)
		if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), "master_name") || strings.Contains(err.Error(), "s3cret-x") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL naming master_name, without the password", u, err)
		}
	}
}

// A real failover (issue 20): the master is frozen (SIGSTOP) while a
// holder, which has stopped refreshing, holds a lock and has written
// through a Guard; the sentinel promotes the replica; the lock is taken
// again there. Mutual exclusion across a failover is outside the
// guarantee (replication is asynchronous), but every token granted after
// the failover is larger than every token of its key granted before it
// (the TIME floor: the replica shares the clock), the Guard refuses the
// stale holder's write, and its refresh and release find the lease lost —
// also once the old master is back as a replica of the new one.
func TestSentinelFailover_TokensRiseAndStaleHolderFenced(t *testing.T) {
	prefix := testPrefix()
	s := secureSentinel(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	// Short client timeouts: requests to the frozen master fail fast.
	u := sentinelURL(s, "app:"+sentinelAppPass+"@", sentinelPassword, prefix, "dial_timeout=1s&read_timeout=1s&write_timeout=1s")
	open := func() locker.Locker {
		l, err := locker.Open(ctx, u, locker.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Open(%s): %v", redactURL(u), err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	stale, fresh := open(), open()
	gc := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: s.MasterName(), SentinelAddrs: []string{s.Addr()},
		SentinelPassword: sentinelPassword, Password: adminPassword, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { gc.Close() })
	guard, err := redis.NewGuard(gc, redis.WithGuardPrefix(prefix+"g:"))
	if err != nil {
		t.Fatal(err)
	}

	// Tokens before: a few grants of each key, the last just before the
	// master stops, so that some may not have reached the replica.
	keys := make([]string, 8)
	before := map[string]uint64{}
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	for range 3 {
		for _, k := range keys {
			lease, err := fresh.TryAcquire(ctx, k)
			if err != nil {
				t.Fatalf("TryAcquire(%s) before the failover: %v", k, err)
			}
			before[k] = max(before[k], lease.Token())
			if err := lease.Release(ctx); err != nil {
				t.Fatalf("Release(%s) before the failover: %v", k, err)
			}
		}
	}
	held, err := stale.TryAcquire(ctx, "res", locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	before["res"] = held.Token()
	if err := guard.Write(ctx, "res", held.Token(), "first holder"); err != nil {
		t.Fatalf("the first holder's write: %v", err)
	}

	old := s.Master(t)
	start := time.Now()
	s.Pause(t, old)
	paused := true
	t.Cleanup(func() {
		if paused {
			s.Unpause(t, old)
		}
	})
	// down-after, the sentinel's election and the promotion: seconds,
	// with room for a loaded machine.
	promoted := s.WaitFailover(t, old, 60*time.Second)
	t.Logf("failover %s -> %s in %v", old, promoted, time.Since(start).Round(time.Millisecond))

	after := func(k string, l locker.Locker) locker.Lease {
		t.Helper()
		// A release lost with the old master leaves its key to expire
		// on the new one: wait for it.
		actx, acancel := context.WithTimeout(ctx, 30*time.Second)
		defer acancel()
		lease, err := l.Acquire(actx, k)
		if err != nil {
			t.Fatalf("Acquire(%s) after the failover: %v", k, err)
		}
		if lease.Token() <= before[k] {
			t.Errorf("%s: token %d after the failover, not above %d granted before it", k, lease.Token(), before[k])
		}
		return lease
	}
	for _, k := range keys {
		after(k, fresh).Release(ctx)
	}
	next := after("res", fresh)
	defer next.Release(ctx)
	if err := guard.Write(ctx, "res", next.Token(), "second holder"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	staleRefused := func(when string) {
		t.Helper()
		if err := guard.Write(ctx, "res", held.Token(), "stale write"); !errors.Is(err, fencing.ErrStaleToken) {
			t.Errorf("the stale holder's write %s = %v, want ErrStaleToken", when, err)
		}
	}
	staleRefused("after the failover")

	// The old master comes back, and the sentinel makes it a replica.
	s.Unpause(t, old)
	paused = false
	s.WaitReplica(t, old, 60*time.Second)
	staleRefused("once the old master is a replica")
	if err := held.Refresh(ctx); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("the stale holder's Refresh = %v, want ErrLeaseLost", err)
	}
	if err := held.Release(ctx); !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("the stale holder's Release = %v, want ErrLeaseLost", err)
	}
	info, err := locker.Inspect(ctx, fresh, "res")
	if err != nil || !info.Held || info.Token != next.Token() {
		t.Errorf("the lock after the stale holder's attempts: %+v, %v; want held with token %d", info, err, next.Token())
	}
	if v, highest, _, err := guard.Get(ctx, "res"); err != nil || v != "second holder" || highest != next.Token() {
		t.Errorf("the guarded value: %q, highest %d, %v; want the new holder's, %d", v, highest, err, next.Token())
	}
}
