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
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/secretcheck"
	"github.com/distlock/locker/internal/testcerts"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// adminPassword protects the default user of the tests' secure servers.
const adminPassword = "admin-Secret-7d1f"

// secureServer starts a private server whose default user needs
// adminPassword, and returns it with an administrator's client.
func secureServer(t *testing.T) (*testenv.Server, *goredis.Client) {
	t.Helper()
	srv := testenv.RedisSecure(t, adminPassword, nil)
	return srv, adminClient(t, srv.Addr(), adminPassword)
}

func adminClient(t testing.TB, addr, password string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password})
	t.Cleanup(func() { c.Close() })
	return c
}

// documentedACL is the ACL SETUSER line of docs/design/security-redis.md,
// as words, for user name with password and key prefix prefix: the tests
// run the Locker under exactly what the documentation tells users to grant.
func documentedACL(t testing.TB, name, password, prefix string) []any {
	t.Helper()
	doc, err := os.ReadFile("../docs/design/security-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^ACL SETUSER locker on .*$`).Find(doc)
	if line == nil {
		t.Fatal("docs/design/security-redis.md: no line starting ACL SETUSER locker on")
	}
	s := strings.ReplaceAll(string(line), "locker:*", prefix+"*")
	s = strings.Replace(s, "SETUSER locker ", "SETUSER "+name+" ", 1)
	s = strings.Replace(s, ">PASSWORD", ">"+password, 1)
	var words []any
	for _, w := range strings.Fields(s) {
		words = append(words, w)
	}
	return words
}

// setUser runs ACL SETUSER with words (after "ACL SETUSER name").
func setUser(t testing.TB, admin *goredis.Client, words ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER"}, words...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", words, err)
	}
}

// lockUser makes a user with the documented ACL for prefix.
func lockUser(t testing.TB, admin *goredis.Client, name, password, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.Do(ctx, documentedACL(t, name, password, prefix)...).Err(); err != nil {
		t.Fatalf("the documented ACL line for %s: %v", name, err)
	}
}

// userClient is a client of addr authenticated as user.
func userClient(addr, user, password string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, Username: user, Password: password, ContextTimeoutEnabled: true})
}

// wantUnauthorized fails t unless err is ErrUnauthorized (and neither
// ErrUnavailable nor ErrLocked) and keeps the server's message code.
func wantUnauthorized(t testing.TB, what string, err error, code string) {
	t.Helper()
	switch {
	case !errors.Is(err, locker.ErrUnauthorized):
		t.Errorf("%s = %v, want ErrUnauthorized", what, err)
	case errors.Is(err, locker.ErrUnavailable), errors.Is(err, locker.ErrLocked):
		t.Errorf("%s = %v: ErrUnauthorized, but also ErrUnavailable or ErrLocked", what, err)
	case !strings.Contains(err.Error(), code):
		t.Errorf("%s = %v: the server's %s is missing", what, err, code)
	}
}

// Open refuses a wrong password, a user without one, and a missing
// password with ErrUnauthorized and the server's own words.
func TestRedis_Open_RefusedCredentials_Unauthorized(t *testing.T) {
	srv, admin := secureServer(t)
	lockUser(t, admin, "app", "app-pass", "locker:")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct{ name, userinfo, code string }{
		{"wrong password", "app:wrong@", "WRONGPASS"},
		{"wrong default password", ":wrong@", "WRONGPASS"},
		{"unknown user", "nobody:app-pass@", "WRONGPASS"},
		{"no password", "", "NOAUTH"},
	} {
		l, err := locker.Open(ctx, "redis://"+c.userinfo+srv.Addr()+"/0?accept_eviction=true")
		if err == nil {
			l.Close()
		}
		wantUnauthorized(t, "Open with "+c.name, err, c.code)
	}
	l, err := locker.Open(ctx, "redis://app:app-pass@"+srv.Addr()+"/0?accept_eviction=true")
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	l.Close()
}

// The conformance suite passes for a user holding exactly the documented
// ACL, and nothing more.
func TestConformance_RestrictedUser(t *testing.T) {
	srv, admin := secureServer(t)
	h := newHarness([]string{srv.Addr()}, false, nil)
	lockUser(t, admin, "app", "app-pass", h.prefix)
	h.connect = func(addrs []string) []goredis.UniversalClient {
		return []goredis.UniversalClient{userClient(addrs[0], "app", "app-pass")}
	}
	// The lock user may not read maxmemory-policy (CONFIG GET also
	// reads requirepass): its operator vouches for noeviction.
	h.opts = []locker.Option{redis.WithAcceptEviction(true)}
	conformance.Run(t, h)
	noDenials(t, "app", admin)
}

// A lock user may not read maxmemory-policy: unless the policy is vouched
// for with accept_eviction, the Locker is refused with ErrUnauthorized
// naming the permission and the option, rather than run unchecked.
func TestRedis_RestrictedUser_EvictionCheck(t *testing.T) {
	srv, admin := secureServer(t)
	lockUser(t, admin, "app", "app-pass", "locker:")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l := newSingleClient(t, userClient(srv.Addr(), "app", "app-pass"))
	_, err := l.TryAcquire(ctx, "k")
	wantUnauthorized(t, "TryAcquire by a user without +config|get", err, "NOPERM")
	for _, s := range []string{"+config|get", "accept_eviction"} {
		if err != nil && !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal %q does not name %s", err, s)
		}
	}
	_, err = locker.Open(ctx, "redis://app:app-pass@"+srv.Addr()+"/0")
	wantUnauthorized(t, "Open by a user without +config|get", err, "NOPERM")

	accepting := newSingleClient(t, userClient(srv.Addr(), "app", "app-pass"), redis.WithAcceptEviction(true))
	lease, err := accepting.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire with accept_eviction: %v", err)
	}
	lease.Release(ctx)
	opened, err := locker.Open(ctx, "redis://app:app-pass@"+srv.Addr()+"/0?accept_eviction=true")
	if err != nil {
		t.Fatalf("Open with accept_eviction: %v", err)
	}
	opened.Close()
}

// Permissions taken away from a user under way refuse each operation with
// ErrUnauthorized: a refresh (the lease is lost, the cause kept), a
// release, a script calling a command the user may not run, and the
// wake-up subscription of a waiting Acquire.
func TestRedis_PermissionRevoked_Unauthorized(t *testing.T) {
	srv, admin := secureServer(t)
	prefix := testPrefix()
	lockUser(t, admin, "app", "app-pass", prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newSingleClient(t, userClient(srv.Addr(), "app", "app-pass"),
		redis.WithPrefix(prefix), redis.WithAcceptEviction(true), locker.WithAutoRefresh(false))

	// Scripts: the user may run EVALSHA, but not a command acquire.lua calls.
	setUser(t, admin, "app", "-time")
	_, err := l.TryAcquire(ctx, "script")
	wantUnauthorized(t, "TryAcquire whose script calls a command denied", err, "can't run this command")
	setUser(t, admin, "app", "+time")

	// Pub/sub: an Acquire that must wait subscribes to its channel.
	held, err := l.TryAcquire(ctx, "sub")
	if err != nil {
		t.Fatal(err)
	}
	setUser(t, admin, "app", "resetchannels")
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = l.Acquire(actx, "sub")
	acancel()
	wantUnauthorized(t, "Acquire whose subscription is denied", err, "NOPERM")

	setUser(t, admin, "app", "&"+prefix+"*")

	// Keys: refresh and release of a lock held.
	setUser(t, admin, "app", "resetkeys")
	err = held.Refresh(ctx)
	wantUnauthorized(t, "Refresh with the key denied", err, "NOPERM")
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("Refresh with the key denied = %v, want the lease lost too", err)
	}
	held2, err := newSingleClient(t, userClient(srv.Addr(), "app", "app-pass"), redis.WithAcceptEviction(true)).TryAcquire(ctx, "other")
	wantUnauthorized(t, "TryAcquire with the key denied", err, "NOPERM")
	if held2 != nil {
		held2.Release(ctx)
	}
	setUser(t, admin, "app", "~"+prefix+"*")
	lease, err := l.TryAcquire(ctx, "rel")
	if err != nil {
		t.Fatal(err)
	}
	setUser(t, admin, "app", "resetkeys")
	wantUnauthorized(t, "Release with the key denied", lease.Release(ctx), "NOPERM")
}

// A second user, whose ACL covers another prefix, can neither see nor
// touch the first user's locks: every operation on them is refused with
// ErrUnauthorized, and the first user's lock stays as it was.
func TestRedis_Isolation_OtherUserRefused(t *testing.T) {
	srv, admin := secureServer(t)
	pa, pb := testPrefix(), testPrefix()
	lockUser(t, admin, "alice", "alice-pass", pa)
	lockUser(t, admin, "bob", "bob-pass", pb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := newSingleClient(t, userClient(srv.Addr(), "alice", "alice-pass"), redis.WithPrefix(pa), redis.WithAcceptEviction(true))
	lease, err := alice.TryAcquire(ctx, "k", locker.WithOwner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)

	// Bob's Locker aimed at Alice's prefix.
	bob := newSingleClient(t, userClient(srv.Addr(), "bob", "bob-pass"), redis.WithPrefix(pa), redis.WithAcceptEviction(true))
	_, err = locker.Inspect(ctx, bob, "k")
	wantUnauthorized(t, "Inspect of another user's lock", err, "NOPERM")
	err = nil
	for _, e := range locker.List(ctx, bob, "") {
		if e != nil {
			err = e
			break
		}
	}
	wantUnauthorized(t, "List of another user's locks", err, "NOPERM")
	_, err = bob.TryAcquire(ctx, "k")
	wantUnauthorized(t, "TryAcquire of another user's lock", err, "NOPERM")
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = bob.Acquire(actx, "free")
	acancel()
	wantUnauthorized(t, "Acquire of a key under another user's prefix", err, "NOPERM")

	// Nor by hand: the lock key, its fence and its channels are out of reach.
	raw := userClient(srv.Addr(), "bob", "bob-pass")
	defer raw.Close()
	keys, err := admin.Keys(ctx, pa+"*:lock").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("lock keys %v (%v), want Alice's one", keys, err)
	}
	for _, cmd := range [][]any{
		{"DEL", keys[0]}, {"PEXPIRE", keys[0], 1}, {"SET", keys[0], "bob"}, {"GET", keys[0]},
		{"SET", strings.TrimSuffix(keys[0], ":lock") + ":fence", 1 << 62},
		{"PUBLISH", pa + "w:x", "x"},
	} {
		err := raw.Do(ctx, cmd...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("Bob's %v = %v, want NOPERM", cmd, err)
		}
	}
	// What the ACL does not hide (as the documentation says): SCAN is
	// keyless, and lists the names under Alice's prefix to Bob.
	var seen []string
	for cur := uint64(0); ; {
		var page []string
		if page, cur, err = raw.Scan(ctx, cur, pa+"*:lock", 1000).Result(); err != nil {
			t.Fatalf("Bob's SCAN: %v", err)
		}
		if seen = append(seen, page...); cur == 0 {
			break
		}
	}
	if len(seen) != 1 || seen[0] != keys[0] {
		t.Errorf("Bob's SCAN of Alice's prefix found %v, want her lock key's name %s (SCAN is not filtered by key patterns)", seen, keys[0])
	}
	ps := raw.Subscribe(ctx, pa+"w:x")
	if _, err := ps.Receive(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("Bob's SUBSCRIBE to Alice's channel = %v, want NOPERM", err)
	}
	ps.Close()

	// Alice's lock is untouched, and Bob works in his own prefix.
	info, err := locker.Inspect(ctx, alice, "k")
	if err != nil || !info.Held || info.Token != lease.Token() || info.Owner != "alice" {
		t.Errorf("Alice's lock after Bob's attempts: %+v, %v; want held by alice with token %d", info, err, lease.Token())
	}
	if err := lease.Refresh(ctx); err != nil {
		t.Errorf("Alice's refresh after Bob's attempts: %v", err)
	}
	own := newSingleClient(t, userClient(srv.Addr(), "bob", "bob-pass"), redis.WithPrefix(pb), redis.WithAcceptEviction(true))
	bl, err := own.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("Bob in his own prefix: %v", err)
	}
	bl.Release(ctx)
}

// tlsServer starts a private server speaking TLS only, that requires a
// client certificate signed by its CA, and returns it with the
// directory of the CA (ca.pem) and a client pair (client.pem,
// client-key.pem).
func tlsServer(t *testing.T) (*testenv.Server, *testcerts.CA, testcerts.Pair, string) {
	t.Helper()
	ca := testcerts.NewCA(t, "redis test CA")
	server, client := ca.Server(t), ca.Client(t, "app")
	srv := testenv.RedisSecure(t, adminPassword, &launch.RedisTLS{
		CA: ca.CertPEM, Cert: server.CertPEM, Key: server.KeyPEM, AuthClients: true,
		Probe: ca.ClientTLS(t, &client),
	})
	return srv, ca, client, ca.WriteFiles(t, map[string]testcerts.Pair{"client": client})
}

// rediss:// verifies the server against ca_file and presents cert_file
// and key_file; a client that does not trust the server's CA refuses it,
// and the server refuses a client without a certificate with
// ErrUnauthorized. The client's own TLS configuration (New) works alike.
func TestRedis_TLS_VerifiedBothWays(t *testing.T) {
	srv, ca, client, dir := tlsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files := "ca_file=" + dir + "/ca.pem&cert_file=" + dir + "/client.pem&key_file=" + dir + "/client-key.pem"
	work := func(l locker.Locker, what string) {
		t.Helper()
		lease, err := l.TryAcquire(ctx, "tls")
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", what, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("%s: Release: %v", what, err)
		}
	}
	for _, u := range []string{
		"rediss://:" + adminPassword + "@" + srv.Addr() + "/0?" + files,
		"redis://:" + adminPassword + "@" + srv.Addr() + "/0?tls=true&" + files,
		"rediss://:" + adminPassword + "@" + srv.Addr() + "/0?server_name=localhost&" + files,
	} {
		l, err := locker.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%s): %v", redactURL(u), err)
		}
		work(l, redactURL(u))
		l.Close()
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: adminPassword, ContextTimeoutEnabled: true,
		TLSConfig: ca.ClientTLS(t, &client)})
	work(newSingleClient(t, c), "New over a client with TLSConfig")

	// A client that does not trust the test CA (the system's roots).
	l, err := locker.Open(ctx, "rediss://:"+adminPassword+"@"+srv.Addr()+"/0?cert_file="+dir+"/client.pem&key_file="+dir+"/client-key.pem")
	if err == nil {
		l.Close()
		t.Fatal("Open without the server's CA succeeded")
	}
	if !strings.Contains(err.Error(), "certificate") || errors.Is(err, locker.ErrLocked) {
		t.Errorf("Open without the server's CA = %v, want a certificate verification error", err)
	}
	t.Logf("without the CA: %v", err)
	// A client without a certificate, which the server requires.
	l, err = locker.Open(ctx, "rediss://:"+adminPassword+"@"+srv.Addr()+"/0?ca_file="+dir+"/ca.pem")
	if err == nil {
		l.Close()
		t.Fatal("Open without a client certificate succeeded")
	}
	wantUnauthorized(t, "Open without a client certificate", err, "certificate")
	t.Logf("without a client certificate: %v", err)
	// Plain text to a TLS port is no answer at all.
	l, err = locker.Open(ctx, "redis://:"+adminPassword+"@"+srv.Addr()+"/0?dial_timeout=2s&read_timeout=2s")
	if err == nil {
		l.Close()
		t.Fatal("Open in plain text of a TLS-only server succeeded")
	}
}

// redactURL is u with its password hidden, for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// No password reaches an error, a log line, a span or a metric of a
// Locker opened with a password in its URL: refused, then granted,
// released, and lost twice (its key deleted; its permission revoked).
func TestRedis_Secrets_NeverRecorded(t *testing.T) {
	srv, admin := secureServer(t)
	const password, wrong = "app-Pass-93c1e", "wrong-Pass-5b07"
	prefix := testPrefix()
	lockUser(t, admin, "app", password, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := secretcheck.New()
	opts := append(r.Options(), locker.WithAutoRefresh(false)) // one meter provider: a reader registers once
	base := "redis://app:%s@" + srv.Addr() + "/0?accept_eviction=true&prefix=" + url.QueryEscape(prefix)
	var errs []error
	_, err := locker.Open(ctx, strings.Replace(base, "%s", wrong, 1), opts...)
	wantUnauthorized(t, "Open with a wrong password", err, "WRONGPASS")
	errs = append(errs, err)
	l, err := locker.Open(ctx, strings.Replace(base, "%s", password, 1), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	errs = append(errs, lease.Release(ctx))
	lease, err = l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Del(ctx, lockKey(t, admin, prefix)).Err(); err != nil {
		t.Fatal(err)
	}
	err = lease.Refresh(ctx)
	if !errors.Is(err, locker.ErrLeaseLost) {
		t.Errorf("Refresh of a deleted lock = %v, want ErrLeaseLost", err)
	}
	errs = append(errs, err, lease.Err(), lease.Release(ctx))
	lease, err = l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	setUser(t, admin, "app", "resetkeys")
	err = lease.Refresh(ctx)
	wantUnauthorized(t, "Refresh with the key denied", err, "NOPERM")
	errs = append(errs, err, lease.Err(), lease.Release(ctx))
	_, err = l.TryAcquire(ctx, "k")
	errs = append(errs, err)
	r.Check(t, []string{password, wrong}, errs...)
}

// lockKey is the one lock key under prefix.
func lockKey(t testing.TB, admin *goredis.Client, prefix string) string {
	t.Helper()
	keys, err := admin.Keys(context.Background(), prefix+"*:lock").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("lock keys under %q: %v (%v), want one", prefix, keys, err)
	}
	return keys[0]
}

// Redlock's masters are independent servers, each with its own password:
// password_N (and username_N) in the URL give master N's. Refusals that
// alone deny the quorum are ErrUnauthorized; one refusal among three
// masters is spared like any failed master.
func TestRedlock_PerMasterCredentials(t *testing.T) {
	pw := []string{"m1-Pass-a8", "m2-Pass-b9", "m3-Pass-c0"}
	c := testenv.RedisSecureMasters(t, pw)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hosts := strings.Join(c.Addrs(), ",")
	open := func(p ...string) (locker.Locker, error) {
		q := url.Values{}
		for i, v := range p {
			q.Set(fmt.Sprintf("password_%d", i+1), v)
		}
		return locker.Open(ctx, "redlock://"+hosts+"/?"+q.Encode())
	}
	l, err := open(pw...)
	if err != nil {
		t.Fatalf("Open with each master's password: %v", err)
	}
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l.Close()

	l, err = open(pw[0], "wrong", pw[2])
	if err != nil {
		t.Fatalf("Open with one master's password wrong (a majority still answers): %v", err)
	}
	lease, err = l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire with one master refusing: %v", err)
	}
	lease.Release(ctx)
	l.Close()

	_, err = open(pw[0], "wrong", "wrong")
	wantUnauthorized(t, "Open with two of three masters' passwords wrong", err, "WRONGPASS")
	_, err = open("wrong", "wrong", "wrong")
	wantUnauthorized(t, "Open with every master's password wrong", err, "WRONGPASS")

	// One password for all (the URL's user info) with one master's own.
	l, err = locker.Open(ctx, "redlock://:"+pw[0]+"@"+hosts+"/?password_2="+pw[1]+"&password_3="+pw[2])
	if err != nil {
		t.Fatalf("Open with the user info's password and two masters' own: %v", err)
	}
	l.Close()
}

// username_N and password_N name a Redlock master by its place in the
// host list: out of range, or on a URL that is not Redlock's, they are
// refused, without repeating the value.
func TestRedlock_PerMasterCredentials_URLChecked(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?password_4=s3cret-x",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?password_0=s3cret-x",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?password_01=s3cret-x",
		"redis://127.0.0.1:1/0?password_1=s3cret-x",
		"redis://127.0.0.1:1,127.0.0.1:2/?username_1=u",
	} {
		_, err := locker.Open(ctx, u)
		if !errors.Is(err, locker.ErrInvalidURL) || strings.Contains(err.Error(), "s3cret-x") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL without the password", u, err)
		}
	}
}

// A Cluster whose nodes require a password: the conformance suite passes
// as a user holding the documented ACL, plus the Cluster's own line, on
// every node (ACL users are per node).
func TestConformance_ClusterRestrictedUser(t *testing.T) {
	c := testenv.RedisSecureCluster(t, adminPassword)
	h := newHarness(c.Addrs(), false, nil)
	var admins []*goredis.Client
	for _, a := range c.Addrs() {
		admin := adminClient(t, a, adminPassword)
		lockUser(t, admin, "app", "app-pass", h.prefix)
		setUser(t, admin, clusterACL(t)...)
		admins = append(admins, admin)
	}
	h.connect = func(addrs []string) []goredis.UniversalClient {
		return []goredis.UniversalClient{goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: addrs, Username: "app", Password: "app-pass", ContextTimeoutEnabled: true})}
	}
	h.opts = []locker.Option{redis.WithAcceptEviction(true)}
	conformance.Run(t, h)
	noDenials(t, "app", admins...)

	// The URL form, and a wrong password on it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := "redis://app:app-pass@" + strings.Join(c.Addrs(), ",") + "/?accept_eviction=true&prefix=" + url.QueryEscape(h.prefix)
	l, err := locker.Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%s): %v", redactURL(u), err)
	}
	lease, err := l.TryAcquire(ctx, "url")
	if err != nil {
		t.Fatalf("TryAcquire on the Cluster by URL: %v", err)
	}
	lease.Release(ctx)
	l.Close()
	_, err = locker.Open(ctx, strings.Replace(u, "app-pass", "wrong", 1))
	wantUnauthorized(t, "Open of the Cluster with a wrong password", err, "WRONGPASS")
}

// noDenials fails t if any server refused user a command, key or channel
// (ACL LOG): the documented ACL must let through everything a Locker's
// client sends, not only what the suite would see fail. A client can go on
// past a refusal — go-redis's Cluster client asks for COMMAND's table
// before each command until it gets it, and only logs the NOPERM — at a
// cost no test of results shows.
func noDenials(t *testing.T, user string, admins ...*goredis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, admin := range admins {
		entries, err := admin.ACLLog(ctx, 1000).Result()
		if err != nil {
			t.Fatalf("ACL LOG: %v", err)
		}
		for _, e := range entries {
			if e.Username == user && e.Reason != "auth" {
				t.Errorf("%s refused %s %q to %s %d times (context %s)",
					admin.Options().Addr, e.Reason, e.Object, user, e.Count, e.Context)
			}
		}
	}
}

// clusterACL is the second ACL SETUSER line of
// docs/design/security-redis.md (what a Cluster client needs besides), as
// words after ACL SETUSER, for user app.
func clusterACL(t testing.TB) []any {
	t.Helper()
	doc, err := os.ReadFile("../docs/design/security-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^ACL SETUSER locker \+.*$`).Find(doc)
	if line == nil {
		t.Fatal("docs/design/security-redis.md: no line starting ACL SETUSER locker +")
	}
	words := []any{"app"}
	for _, w := range strings.Fields(string(line))[3:] {
		words = append(words, w)
	}
	return words
}

// A Redlock user whose permission is revoked on one master of three goes
// on with the other two; revoked on two, the refusals alone deny the
// quorum: refresh, release and acquire are ErrUnauthorized.
func TestRedlock_PermissionRevokedOnMasters(t *testing.T) {
	pw := []string{"m1-Pass-a8", "m2-Pass-b9", "m3-Pass-c0"}
	c := testenv.RedisSecureMasters(t, pw)
	prefix := testPrefix()
	admins := make([]*goredis.Client, len(pw))
	for i, a := range c.Addrs() {
		admins[i] = adminClient(t, a, pw[i])
		lockUser(t, admins[i], "app", "app-pass", prefix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := "redlock://app:app-pass@" + strings.Join(c.Addrs(), ",") + "/?accept_eviction=true&prefix=" + url.QueryEscape(prefix)
	l, err := locker.Open(ctx, u, locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	setUser(t, admins[0], "app", "resetkeys")
	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("Refresh with one master of three refusing: %v", err)
	}
	setUser(t, admins[1], "app", "resetkeys")
	wantUnauthorized(t, "Refresh with two masters of three refusing", lease.Refresh(ctx), "NOPERM")
	_, err = l.TryAcquire(ctx, "other")
	wantUnauthorized(t, "TryAcquire with two masters of three refusing", err, "NOPERM")
}
