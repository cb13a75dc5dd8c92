//go:build unix

package procfault_test

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/locker"
	_ "github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/bounds"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/procfault"
	"github.com/distlock/locker/internal/testenv"
	_ "github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
)

// TestMain removes the shared servers after the tests.
func TestMain(m *testing.M) { testenv.Main(m) }

const (
	// slack is added to every stated bound: room for a loaded machine
	// (load averages of 20 are seen), never part of a guarantee.
	slack = 10 * time.Second
	// inFlight is how long after the holder says "sending" it is killed:
	// time for the request to leave the process and enter the proxy.
	inFlight = 100 * time.Millisecond
)

// A backend is a deployment the holder reaches through proxies and the
// test reaches directly.
type backend struct {
	ttl       time.Duration
	holderURL string // through proxies
	directURL string
	proxies   []*testenv.Proxy
	store     string // procfault.OpenResource's kind and address
	storeAddr string
	// bound is the stated time from the last request a dead or stopped
	// holder's lock got to the lock being free, for a lease granted ttl.
	bound func(ttl time.Duration) time.Duration
	// nextTTL is the next holder's TTL (ttl if zero). Its lease must
	// outlive the checks after the takeover; at a TTL of 1 s a loaded
	// fresh-clone run (2026-12-02, PostgreSQL) saw it lost to a late
	// refresh. ZooKeeper's is its Locker's session timeout.
	nextTTL time.Duration
}

// nextHolderTTL is the next holder's TTL where the Locker allows any.
const nextHolderTTL = 10 * time.Second

func ttlBound(ttl time.Duration) time.Duration { return ttl }

func fresh() string { return launch.RandomID(5) }

// run runs every process fault on b.
func run(t *testing.T, bin string, b backend) {
	t.Run("SIGSTOP past the TTL", func(t *testing.T) { stopPastTTL(t, bin, b) })
	for _, at := range []string{"acquire", "refresh", "release"} {
		t.Run("SIGKILL mid-"+at, func(t *testing.T) { killMid(t, bin, b, at) })
	}
}

// fixture is what one scenario works on: a fresh key and resource, the
// test's own Locker and view of the resource.
type fixture struct {
	key, resource string
	l             locker.Locker
	res           procfault.Resource
}

func newFixture(t *testing.T, b backend) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fixture{key: "k" + fresh(), resource: "r" + fresh()}
	var err error
	if f.l, err = locker.Open(ctx, b.directURL); err != nil {
		t.Fatalf("Open %s: %v", b.directURL, err)
	}
	t.Cleanup(func() { f.l.Close() })
	if f.res, err = procfault.OpenResource(ctx, b.store, b.storeAddr, f.resource); err != nil {
		t.Fatalf("OpenResource: %v", err)
	}
	t.Cleanup(func() { f.res.Close() })
	return f
}

// holder starts a holder process on f's key and resource. It refreshes
// its lease in the background, as a real holder does, besides the
// refreshes it is told to make.
func (f *fixture) holder(t *testing.T, bin string, b backend) *holder {
	return startHolder(t, bin, "-url", b.holderURL, "-key", f.key, "-ttl", b.ttl.String(),
		"-store", b.store, "-store-addr", b.storeAddr, "-resource", f.resource)
}

// takeOver acquires the key as the next holder within bound+slack of
// since, checks its token is above prev, and writes value through the
// fence.
func (f *fixture) takeOver(t *testing.T, b backend, bound time.Duration, since time.Time, prev uint64, value string) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), since.Add(bound+slack))
	defer cancel()
	lease, err := f.l.Acquire(ctx, f.key, locker.WithTTL(cmp.Or(b.nextTTL, b.ttl)))
	if err != nil {
		t.Fatalf("next holder: Acquire within %v (stated bound %v + slack): %v", bound+slack, bound, err)
	}
	bounds.Took(t, "next holder granted the key", time.Since(since), bound+slack)
	t.Logf("next holder granted token %d after %v (stated bound %v)", lease.Token(), time.Since(since).Round(time.Millisecond), bound)
	if lease.Token() <= prev {
		t.Errorf("next holder's token %d is not above the dead or stopped holder's %d", lease.Token(), prev)
	}
	if err := f.res.Write(ctx, lease.Token(), value); err != nil {
		t.Fatalf("next holder's fenced write: %v", err)
	}
	return lease
}

// release releases lease as a careful caller does: a release whose outcome
// is unknown (ErrUnavailable: a Redlock of TTL 1 s gives each master 100 ms,
// which a loaded machine can exceed on all three at once) leaves the lease
// as it was and is tried again, until ctx ends.
func release(ctx context.Context, lease locker.Lease) error {
	for {
		err := lease.Release(ctx)
		if !errors.Is(err, locker.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nothingLeft releases lease and waits (within bound+slack) for the key
// to show no holder and no waiter: nothing of the dead holder stays.
func (f *fixture) nothingLeft(t *testing.T, lease locker.Lease, bound time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), bound+slack)
	defer cancel()
	if err := release(ctx, lease); err != nil {
		t.Fatalf("next holder's Release: %v", err)
	}
	var info locker.LockInfo
	for {
		var err error
		info, err = locker.Inspect(ctx, f.l, f.key)
		if err == nil && !info.Held && info.Waiters <= 0 { // negative: not counted (Redlock)
			bounds.Took(t, "nothing left after the release", time.Since(start), bound+slack)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("after the release, within %v: Inspect = %+v, %v; want no holder and no waiter", bound+slack, info, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopPastTTL stops a holder past its TTL: another
// Locker takes the key with a larger token and writes; the resumed holder
// must report the loss, its late write must be refused, and its release
// must leave the new holder's lock alone.
func stopPastTTL(t *testing.T, bin string, b backend) {
	f := newFixture(t, b)
	h := f.holder(t, bin, b)
	h.send("acquire")
	tok, ttl := h.granted(h.expect(30*time.Second, "granted", "acquire-error"))
	h.send("write before-stop")
	if got, want := h.expect(30*time.Second, "write"), "write "+u(tok)+" accepted"; got != want {
		t.Fatalf("holder's write: %q, want %q", got, want)
	}
	h.signal(syscall.SIGSTOP)
	stopped := time.Now()
	next := f.takeOver(t, b, b.bound(ttl), stopped, tok, "next")
	h.signal(syscall.SIGCONT)
	h.expect(slack, "lost")
	h.send("write late")
	if got := h.expect(30*time.Second, "write"); !strings.HasPrefix(got, "write "+u(tok)+" refused") {
		t.Errorf("the resumed holder's late write: %q, want it refused by the fence", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if v, err := f.res.Read(ctx); err != nil || v != "next" {
		t.Errorf("resource = %q, %v; want the next holder's %q", v, err, "next")
	}
	h.send("release")
	if got := h.expect(30*time.Second, "released", "release-error"); !strings.HasPrefix(got, "release-error lost") {
		t.Errorf("the resumed holder's release: %q, want ErrLeaseLost", got)
	}
	if err := next.Err(); err != nil {
		t.Errorf("the next holder's lease after the old holder's release: %v", err)
	}
	if info, err := locker.Inspect(ctx, f.l, f.key); err != nil || !info.Held || info.Token != next.Token() {
		t.Errorf("Inspect after the old holder's release = %+v, %v; want held with token %d", info, err, next.Token())
	}
	h.exit()
	f.nothingLeft(t, next, b.bound(ttl))
}

// killMid kills a holder while its request of kind at is held in its
// proxies, then checks the next holder gets the key within the stated
// bound after the dead holder's last request landed, with a larger token,
// and that nothing stays once it released.
func killMid(t *testing.T, bin string, b backend, at string) {
	f := newFixture(t, b)
	h := f.holder(t, bin, b)
	var prev uint64
	ttl := b.ttl
	if at == "acquire" {
		// The token to beat comes from a holder before the killed one.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lease, err := f.l.Acquire(ctx, f.key, locker.WithTTL(b.ttl))
		if err != nil {
			cancel()
			t.Fatalf("first holder: %v", err)
		}
		prev, ttl = lease.Token(), locker.GrantedTTL(lease)
		err = release(ctx, lease)
		cancel()
		if err != nil {
			t.Fatalf("first holder's release: %v", err)
		}
	} else {
		h.send("acquire")
		prev, ttl = h.granted(h.expect(30*time.Second, "granted", "acquire-error"))
		h.send("write held")
		if got, want := h.expect(30*time.Second, "write"), "write "+u(prev)+" accepted"; got != want {
			t.Fatalf("holder's write: %q, want %q", got, want)
		}
	}
	// The holder's requests are held in its proxies for half the TTL: a
	// request sent meanwhile reaches the server after its sender was
	// killed, and while the lock it refreshes or releases still stands.
	delay := b.ttl / 2
	for _, p := range b.proxies {
		p.DelayRequests(t, delay)
	}
	h.send(at)
	h.expect(30*time.Second, "sending "+at)
	time.Sleep(inFlight)
	h.signal(syscall.SIGKILL)
	// Every request the holder sent (this one, a background refresh)
	// lands within delay after the kill; the bound runs from there.
	time.Sleep(delay)
	landed := time.Now()
	for _, p := range b.proxies {
		p.Heal(t)
	}
	next := f.takeOver(t, b, b.bound(ttl), landed, prev, "next")
	f.nothingLeft(t, next, b.bound(ttl))
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// withQuery returns raw with params set in its query.
func withQuery(t *testing.T, raw string, params ...string) string {
	t.Helper()
	v, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := v.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	v.RawQuery = q.Encode()
	return v.String()
}
