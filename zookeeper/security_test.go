package zookeeper_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/secretcheck"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// topRoot returns a fresh root directly under "/": a digest identity's ACL
// on a shared parent such as /locker-test would lock every other test out.
func topRoot(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "/locker-sec-" + hex.EncodeToString(b[:])
}

// authURL is zkURL with user:password and more query parameters.
func authURL(servers []string, user, password, root, query string) string {
	u := "zookeeper://" + url.UserPassword(user, password).String() + "@" + strings.Join(servers, ",") + root +
		"?session_timeout=" + testTTL.String()
	if query != "" {
		u += "&" + query
	}
	return u
}

// openURL opens u, closed when the test ends.
func openURL(t testing.TB, u string, opts ...locker.Option) locker.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := locker.Open(ctx, u, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// hold takes key on l, released when the test ends.
func hold(t testing.TB, l locker.Locker, key string) locker.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("TryAcquire %q: %v", key, err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

// authConn is rawConn authenticated as user:password.
func authConn(t testing.TB, servers []string, user, password string) *zk.Conn {
	t.Helper()
	c := rawConn(t, servers, nil)
	if user != "" {
		if err := c.AddAuth("digest", []byte(user+":"+password)); err != nil {
			t.Fatalf("AddAuth: %v", err)
		}
	}
	return c
}

// wantUnauthorized fails t unless err is ErrUnauthorized, and neither
// ErrUnavailable nor ErrLocked, and keeps ZooKeeper's message.
func wantUnauthorized(t testing.TB, what string, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, locker.ErrUnauthorized):
		t.Errorf("%s = %v, want ErrUnauthorized", what, err)
	case errors.Is(err, locker.ErrUnavailable), errors.Is(err, locker.ErrLocked):
		t.Errorf("%s = %v: ErrUnauthorized must not match ErrUnavailable or ErrLocked", what, err)
	case !strings.Contains(err.Error(), "zk: not authenticated"):
		t.Errorf("%s = %v: ZooKeeper's message is lost", what, err)
	}
}

// wantOnlyDigest fails t unless the ACL of p gives all rights to user's
// digest identity and nothing to anyone else.
func wantOnlyDigest(t testing.TB, c *zk.Conn, p, user, password string) {
	t.Helper()
	acl, _, err := c.GetACL(p)
	if err != nil {
		t.Fatalf("GetACL %s: %v", p, err)
	}
	want := zk.DigestACL(zk.PermAll, user, password)
	if len(acl) != 1 || acl[0] != want[0] {
		t.Errorf("ACL of %s = %+v, want %+v alone", p, acl, want)
	}
}

// Every node the backend creates — the root and its missing parents, the
// lock directory, the queue node — carries the identity's ACL alone.
func TestDigest_URL_EveryNodeHasTheIdentitysACL(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t) + "/locks"
	hold(t, openURL(t, authURL(servers, "alice", "s3cret", root, "")), "k")
	c := authConn(t, servers, "alice", "s3cret")
	dir, _, err := c.Children(root)
	if err != nil || len(dir) != 1 {
		t.Fatalf("children of the root: %v, %v", dir, err)
	}
	kids, _, err := c.Children(root + "/" + dir[0])
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of the lock directory: %v, %v", kids, err)
	}
	for _, p := range []string{root[:strings.LastIndex(root, "/")], root, root + "/" + dir[0], root + "/" + dir[0] + "/" + kids[0]} {
		wantOnlyDigest(t, c, p, "alice", "s3cret")
	}
}

// The option is the URL's user info.
func TestDigest_Option_SameAsURL(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	hold(t, dial(t, servers, root, zookeeper.WithDigest("bob", "pw")), "k")
	wantOnlyDigest(t, authConn(t, servers, "bob", "pw"), root, "bob", "pw")
}

// A wrong password is another identity: Open reads the root the right one
// created and reports ErrUnauthorized, as it does for another user.
func TestDigest_WrongPassword_OpenErrUnauthorized(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	openURL(t, authURL(servers, "alice", "right", root, ""))
	for name, u := range map[string]string{
		"wrong password":  authURL(servers, "alice", "wrong", root, ""),
		"another user":    authURL(servers, "mallory", "right", root, ""),
		"no credentials":  zkURL(servers, root), // Open reads nothing: the first lock is refused
		"wrong, sub-root": authURL(servers, "alice", "wrong", root+"/sub", ""),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := locker.Open(ctx, u)
		if err == nil {
			_, err = l.TryAcquire(ctx, "k")
			_ = l.Close()
		}
		cancel()
		wantUnauthorized(t, name, err)
	}
}

// Isolation on a root readable and writable by anyone (made so by an
// administrator): a second identity cannot see, block, take, delete or
// write under the first one's lock, through the Locker or a raw client,
// and the holder keeps its lease throughout.
func TestDigest_SecondIdentity_CannotTouchTheHoldersLock(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	admin := rawConn(t, servers, nil)
	if _, err := admin.Create(root, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	alice := openURL(t, authURL(servers, "alice", "a-pw", root, ""))
	mallory := openURL(t, authURL(servers, "mallory", "m-pw", root, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, err := alice.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}

	_, err = mallory.TryAcquire(ctx, "k")
	wantUnauthorized(t, "TryAcquire by another identity", err)
	_, err = mallory.Acquire(ctx, "k")
	wantUnauthorized(t, "Acquire by another identity", err)
	_, err = locker.Inspect(ctx, mallory, "k")
	wantUnauthorized(t, "Inspect by another identity", err)
	for _, err := range locker.List(ctx, mallory, "") {
		wantUnauthorized(t, "List by another identity", err)
		break
	}
	for _, err := range locker.Watch(ctx, mallory, "k") {
		wantUnauthorized(t, "Watch by another identity", err)
		break
	}

	raw := authConn(t, servers, "mallory", "m-pw")
	kids, _, err := admin.Children(root)
	if err != nil || len(kids) != 1 {
		t.Fatalf("children of the root: %v, %v", kids, err)
	}
	dir := root + "/" + kids[0]
	if _, _, err := raw.Children(dir); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Children of the lock directory = %v, want NOAUTH", err)
	}
	if _, err := raw.Create(dir+"/x", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Create in the lock directory = %v, want NOAUTH", err)
	}
	// The holder's node, by name (listed by its owner): no deletion, no write.
	own, _, err := authConn(t, servers, "alice", "a-pw").Children(dir)
	if err != nil || len(own) != 1 {
		t.Fatalf("alice lists her directory: %v, %v", own, err)
	}
	if err := raw.Delete(dir+"/"+own[0], -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Delete of the holder's node = %v, want NOAUTH", err)
	}
	if _, err := raw.Set(dir+"/"+own[0], []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Set of the holder's node = %v, want NOAUTH", err)
	}
	if _, err := raw.SetACL(dir, zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw SetACL of the lock directory = %v, want NOAUTH", err)
	}

	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("the holder's Refresh after the attempts: %v", err)
	}
	if info, err := locker.Inspect(ctx, alice, "k"); err != nil || !info.Held || info.Token != lease.Token() {
		t.Fatalf("the holder's Inspect: %+v, %v", info, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("the holder's Release: %v", err)
	}
}

// On a root the first identity created, the second is refused at Open, and
// a raw client of it cannot list or create there.
func TestDigest_SecondIdentity_RefusedAtTheOwnersRoot(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	openURL(t, authURL(servers, "alice", "a-pw", root, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := locker.Open(ctx, authURL(servers, "mallory", "m-pw", root, ""))
	wantUnauthorized(t, "Open by another identity", err)
	raw := authConn(t, servers, "mallory", "m-pw")
	if _, _, err := raw.Children(root); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Children of the root = %v, want NOAUTH", err)
	}
	if _, err := raw.Create(root+"/x", nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("raw Create under the root = %v, want NOAUTH", err)
	}
}

// dropDialer dials like net.DialTimeout and can cut the connections it made,
// after which go-zookeeper reconnects (the session lives on).
type dropDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dials int
}

func (d *dropDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.dials++
		d.mu.Unlock()
	}
	return c, err
}

func (d *dropDialer) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

// After a reconnection the identity is the same: go-zookeeper sends the
// credentials again before any other request.
//
// The session is longer than testTTL: this test is about the identity, not
// expiry, and under load (a fresh-clone run beside two CPU-bound processes,
// load 11–34) a 2 s session can run out between the dropped connection and
// the Inspect, which then finds the key free.
func TestDigest_Reconnect_StillAuthenticated(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	d := &dropDialer{}
	l := openURL(t, authURL(servers, "alice", "pw", root, ""), zookeeper.WithDialer(d.dial), zookeeper.WithSessionTimeout(steadySession))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No lease, so no watch, is held across the reconnection: go-zookeeper
	// re-sends watches racily (see scripts/test), and this test runs with
	// the race detector.
	d.drop()
	// Reads and creates need the identity (the root's ACL is alice's).
	// Requests made while the connection is down fail (ErrUnavailable): a
	// careful caller tries again.
	lb, err := l.Acquire(ctx, "b")
	for errors.Is(err, locker.ErrUnavailable) && !errors.Is(err, locker.ErrUnauthorized) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		lb, err = l.Acquire(ctx, "b")
	}
	if err != nil {
		t.Fatalf("Acquire after the reconnection: %v", err)
	}
	defer lb.Release(ctx)
	if info, err := locker.Inspect(ctx, l, "b"); err != nil || !info.Held {
		// The lease's own state tells a lost session from a lock never
		// taken.
		t.Fatalf("Inspect after the reconnection: %+v, %v (the lease's Err: %v)", info, err, lb.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials < 2 {
		t.Fatalf("%d connection(s) made: the connection was never re-established", d.dials)
	}
}

// digestHarness is harness, its Lockers opened from a URL with
// user:password (their own connections, through a killDialer each).
type digestHarness struct{ *harness }

func (h *digestHarness) NewLocker(ctx context.Context, _ *testing.T, opts ...locker.Option) (locker.Locker, error) {
	return h.open(ctx, h.ttl, opts...)
}

// NewLongLocker implements conformance.LongHolder (harness.NewLongLocker).
func (h *digestHarness) NewLongLocker(ctx context.Context, _ *testing.T, ttl time.Duration) (locker.Locker, error) {
	return h.open(ctx, ttl)
}

func (h *digestHarness) open(ctx context.Context, session time.Duration, opts ...locker.Option) (locker.Locker, error) {
	d := &killDialer{}
	u := "zookeeper://suite:suite-pw@" + strings.Join(h.servers, ",") + h.root + "?session_timeout=" + session.String()
	l, err := locker.Open(ctx, u, append([]locker.Option{zookeeper.WithDialer(d.dial)}, opts...)...)
	return h.track(l, d, err)
}

// No password, right or wrong, reaches an error, a log line, a span or a
// metric: a refused Open, a grant, a release, a lost lease.
func TestDigest_Secrets_NeverRecorded(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	const right, wrong = "Right-Pa55word", "Wr0ng-Pa55word"
	r := secretcheck.New()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := &killDialer{}
	l, err := locker.Open(ctx, authURL(servers, "alice", right, root, ""), append(r.Options(), zookeeper.WithDialer(d.dial))...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rw := secretcheck.New() // a Recorder's metric reader serves one provider
	_, refused := locker.Open(ctx, authURL(servers, "alice", wrong, root, ""), rw.Options()...)
	wantUnauthorized(t, "Open with the wrong password", refused)
	released, err := l.TryAcquire(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lost, err := l.TryAcquire(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	d.kill()
	select {
	case <-lost.Done():
	case <-ctx.Done():
		t.Fatal("the lease of a cut-off client was never reported lost")
	}
	r.Check(t, []string{right, wrong}, lost.Err(), lost.Release(ctx), l.Close())
	rw.Check(t, []string{right, wrong}, refused)
}

// A Guard over an authenticated connection, its nodes given to that
// identity (zk.AuthACL): another identity cannot admit a token there.
func TestDigest_Guard_AnotherIdentityRefused(t *testing.T) {
	servers := []string{testenv.ZooKeeper(t).Addr()}
	root := topRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := zookeeper.NewGuard(authConn(t, servers, "alice", "pw"), zookeeper.WithGuardRoot(root), zookeeper.WithGuardACL(zk.AuthACL(zk.PermAll)))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "r", 5); err != nil {
		t.Fatalf("the owner's Admit: %v", err)
	}
	wantOnlyDigest(t, authConn(t, servers, "alice", "pw"), root, "alice", "pw")
	other, err := zookeeper.NewGuard(authConn(t, servers, "mallory", "m-pw"), zookeeper.WithGuardRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthorized(t, "Admit by another identity", other.Admit(ctx, "r", 9))
}
