package etcd_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/secretcheck"
	"github.com/distlock/locker/internal/testenv"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const rootPassword = "root-Secret-7f3a"

// enableAuth turns authentication on as an operator would (etcdctl user
// add root, role add root, user grant-role root root, auth enable), and
// returns a client logged in as root. h gives the endpoints and TLS.
func enableAuth(t *testing.T, h *harness) *clientv3.Client {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	open := &harness{endpoints: h.endpoints, tls: h.tls}
	cli := open.newClient(t)
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable auth: %v", err)
		}
	}
	root := &harness{endpoints: h.endpoints, tls: h.tls, user: "root", password: rootPassword}
	return root.newClient(t)
}

// grantPrefix makes user (password pass) with a role of its own that may
// read and write the keys under prefix, and nothing else: the lines of
// docs/design/security-etcd.md.
func grantPrefix(t *testing.T, root *clientv3.Client, user, pass, prefix string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	role := user + "-locks"
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, role); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, user, pass); return err },
		func() error { _, err := root.UserGrantRole(ctx, user, role); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("grant %s on %q: %v", user, prefix, err)
		}
	}
}

// authServer starts a private etcd with authentication on, and a harness
// whose clients log in as a user whose role covers only its prefix.
func authServer(t *testing.T) (*harness, *clientv3.Client) {
	t.Helper()
	h := newHarness(testenv.EtcdPrivate(t).Addr())
	root := enableAuth(t, h)
	h.user, h.password = "locks", "locks-Secret-91c2"
	grantPrefix(t, root, h.user, h.password, h.prefix)
	return h, root
}

// wantUnauthorized fails t unless err is locker.ErrUnauthorized keeping
// etcd's message, and not ErrUnavailable.
func wantUnauthorized(t *testing.T, what string, err error, message string) {
	t.Helper()
	switch {
	case !errors.Is(err, locker.ErrUnauthorized):
		t.Errorf("%s = %v, want ErrUnauthorized", what, err)
	case errors.Is(err, locker.ErrUnavailable) || errors.Is(err, locker.ErrLocked):
		t.Errorf("%s = %v: ErrUnauthorized, but also ErrUnavailable or ErrLocked", what, err)
	case !strings.Contains(err.Error(), message):
		t.Errorf("%s = %v, want etcd's message %q in it", what, err, message)
	}
}

// firstErr is the first error a List or Watch sequence yields.
func firstErr(seq iter.Seq2[locker.LockInfo, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// The whole suite passes as a user whose role grants read and write on
// the Locker's prefix only: every key, txn, watch and lease call the
// backend makes stays within it.
func TestAuth_PrefixOnlyRole_Conformance(t *testing.T) {
	h, _ := authServer(t)
	conformance.Run(t, h)
}

// Open with a wrong password, or with none, fails with ErrUnauthorized and
// etcd's reason.
func TestAuth_BadCredentials_OpenErrUnauthorized(t *testing.T) {
	h, _ := authServer(t)
	addr := h.endpoints[0]
	for _, c := range []struct{ url, message string }{
		{"etcd://locks:wrong-password@" + addr + "/" + h.prefix, "authentication failed"},
		{"etcd://nobody:x@" + addr + "/" + h.prefix, "authentication failed"},
		{"etcd://" + addr + "/" + h.prefix, "user name is empty"},
	} {
		l, err := locker.Open(ctxFor(t, 20*time.Second), c.url+"?dial_timeout=5s")
		if err == nil {
			_ = l.Close()
		}
		wantUnauthorized(t, "Open("+strings.Replace(c.url, "wrong-password", "…", 1)+")", err, c.message)
	}
	l, err := locker.Open(ctxFor(t, 20*time.Second), "etcd://locks:"+h.password+"@"+addr+"/"+h.prefix)
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = l.Close()
}

// A user whose role lacks the Locker's prefix is refused every operation
// with ErrUnauthorized, etcd's "permission denied" kept: Open, TryAcquire,
// Acquire, Inspect, List, Watch and a Guard's calls; and Refresh,
// Release and Publish of a lock once the role's permission is revoked.
func TestAuth_NoPermission_EveryOperationErrUnauthorized(t *testing.T) {
	h, root := authServer(t)
	ctx := ctxFor(t, time.Minute)
	const denied = "permission denied"

	_, err := locker.Open(ctx, "etcd://locks:"+h.password+"@"+h.endpoints[0]+"/elsewhere/")
	wantUnauthorized(t, "Open of a prefix outside the role", err, denied)

	outside, err := newLockerOn(h, h.newClient(t), etcd.WithPrefix("elsewhere/"))
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	_, err = outside.TryAcquire(ctx, "k")
	wantUnauthorized(t, "TryAcquire", err, denied)
	_, err = outside.Acquire(ctxFor(t, 20*time.Second), "k")
	wantUnauthorized(t, "Acquire", err, denied)
	_, err = locker.Inspect(ctx, outside, "k")
	wantUnauthorized(t, "Inspect", err, denied)
	wantUnauthorized(t, "List", firstErr(locker.List(ctx, outside, "")), denied)
	wantUnauthorized(t, "Watch", firstErr(locker.Watch(ctx, outside, "k")), denied)
	g := newGuard(t, h.newClient(t), "elsewhere-fence/")
	wantUnauthorized(t, "Guard.Admit", g.Admit(ctx, "r", 1), denied)
	_, err = g.Highest(ctx, "r")
	wantUnauthorized(t, "Guard.Highest", err, denied)

	// A lock taken while permitted, then the permission revoked.
	l, err := newLockerOn(h, h.newClient(t), locker.WithAutoRefresh(false), locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "k", locker.WithValue("v"))
	if err != nil {
		t.Fatalf("TryAcquire while permitted: %v", err)
	}
	if _, err := root.RoleRevokePermission(ctx, "locks-locks", h.prefix, clientv3.GetPrefixRangeEnd(h.prefix)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	err = lease.Refresh(ctx)
	wantUnauthorized(t, "Refresh after the revoke", err, denied)
	err = locker.Publish(ctx, lease, "w")
	wantUnauthorized(t, "Publish after the revoke", err, denied)
	err = lease.Release(ctx)
	wantUnauthorized(t, "Release after the revoke", err, denied)
}

// A waiter whose permission is revoked while it waits ends with
// ErrUnauthorized at its next re-check, instead of re-checking until its
// context ends.
func TestAuth_PermissionRevokedWhileWaiting_AcquireErrUnauthorized(t *testing.T) {
	h, root := authServer(t)
	ctx := ctxFor(t, time.Minute)
	holder, err := h.NewLocker(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.TryAcquire(ctx, "w"); err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	waiter, err := h.NewLocker(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctxFor(t, 30*time.Second), "w")
		done <- err
	}()
	lp := h.prefix + "w\x00"
	for {
		resp, err := root.Get(ctx, lp, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := root.RoleRevokePermission(ctx, "locks-locks", h.prefix, clientv3.GetPrefixRangeEnd(h.prefix)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	// Wake the waiter: the holder's key goes (root may delete it).
	resp, err := root.Get(ctx, lp, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("holder's key: %v %v", resp, err)
	}
	if _, err := root.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v: the waiter re-checked until its context ended", err)
	}
	wantUnauthorized(t, "Acquire of a waiter whose permission went", err, "permission denied")
}

// A user whose role covers another prefix cannot see, take, wait for,
// refresh or release the first user's locks, through a Locker pointed at
// that prefix or through raw etcd calls: each is refused. Its own prefix
// is a key space apart. What etcd's RBAC does not cover — leases — is
// shown as it is: see docs/design/security-etcd.md.
func TestAuth_OtherPrefixUser_IsolatedFromLocks(t *testing.T) {
	h, root := authServer(t)
	ctx := ctxFor(t, time.Minute)
	owner, err := h.NewLocker(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	lease, err := owner.TryAcquire(ctx, "job", locker.WithOwner("alice"))
	if err != nil {
		t.Fatalf("owner's TryAcquire: %v", err)
	}

	other := newHarness(h.endpoints...)
	other.user, other.password = "intruder", "intruder-Secret-55e1"
	grantPrefix(t, root, other.user, other.password, other.prefix)
	cli := other.newClient(t)
	intruder, err := newLockerOn(h, cli) // the owner's prefix, the intruder's credentials
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	const denied = "permission denied"
	_, err = locker.Inspect(ctx, intruder, "job")
	wantUnauthorized(t, "Inspect", err, denied)
	wantUnauthorized(t, "List", firstErr(locker.List(ctx, intruder, "")), denied)
	wantUnauthorized(t, "Watch", firstErr(locker.Watch(ctx, intruder, "job")), denied)
	_, err = intruder.TryAcquire(ctx, "job")
	wantUnauthorized(t, "TryAcquire", err, denied)
	_, err = intruder.Acquire(ctxFor(t, 20*time.Second), "job")
	wantUnauthorized(t, "Acquire", err, denied)

	// Raw calls on the holder's key and lease (names read as root).
	resp, err := root.Get(ctx, h.prefix+"job\x00", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("holder's key: %v, %v", resp, err)
	}
	key, id := string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
	for what, call := range map[string]func() error{
		"delete (release)": func() error { _, err := cli.Delete(ctx, key); return err },
		"put (refresh, publish)": func() error {
			_, err := cli.Put(ctx, key, "x", clientv3.WithIgnoreLease())
			return err
		},
		"revoke of the holder's lease": func() error { _, err := cli.Revoke(ctx, id); return err },
		"lease keys' names": func() error {
			_, err := cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
			return err
		},
	} {
		if err := call(); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("intruder's %s = %v, want permission denied", what, err)
		}
	}

	// The intruder's own prefix is another key space: the same key is free.
	own, err := other.NewLocker(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	mine, err := own.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("intruder's TryAcquire in its own prefix: %v", err)
	}
	_ = mine.Release(ctx)

	// The holder never noticed.
	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("owner's Refresh after the intrusions: %v", err)
	}
	if info, err := locker.Inspect(ctx, owner, "job"); err != nil || !info.Held || info.Token != lease.Token() || info.Owner != "alice" {
		t.Fatalf("owner's Inspect = %+v, %v", info, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("owner's Release: %v", err)
	}

	// etcd's RBAC does not cover leases: any authenticated user lists every
	// lease and renews any of them (documented; a crashed holder's lock can
	// so be kept past its TTL by someone renewing its lease).
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatalf("intruder's Leases: %v", err)
	}
	listed := false
	for _, l := range leases.Leases {
		listed = listed || l.ID == id
	}
	if _, err := cli.KeepAliveOnce(ctx, id); !listed || err != nil {
		t.Errorf("intruder listed the owner's lease: %v, renewed it: %v; the doc says both are possible", listed, err)
	}
}

// No password — the right one, a wrong one, root's — reaches an error, a
// log line (the client's own, at debug, included), a span or a metric,
// through a refused Open, a grant, a busy lock, a release, a lost lease
// and a refused prefix.
func TestAuth_Secrets_NeverShown(t *testing.T) {
	h, root := authServer(t)
	ctx := ctxFor(t, time.Minute)
	r := secretcheck.New()
	const wrong = "wrong-Secret-3b1d"
	addr := h.endpoints[0]
	var errs []error
	_, err := locker.Open(ctx, "etcd://locks:"+wrong+"@"+addr+"/"+h.prefix, r.Options()...)
	if !errors.Is(err, locker.ErrUnauthorized) {
		t.Fatalf("Open with a wrong password: %v", err)
	}
	errs = append(errs, err)
	_, err = locker.Open(ctx, "etcd://locks:"+h.password+"@"+addr+"/elsewhere/", r.Options()...)
	errs = append(errs, err)

	l, err := locker.Open(ctx, "etcd://locks:"+h.password+"@"+addr+"/"+h.prefix+"?request_timeout=2s",
		append(r.Options(), locker.WithTTL(2*time.Second))...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "s")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	_, err = l.TryAcquire(ctx, "s")
	errs = append(errs, err)
	errs = append(errs, lease.Release(ctx), lease.Release(ctx))

	// A lost lease: its key deleted behind its back.
	lost, err := l.TryAcquire(ctx, "lost")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := root.Delete(ctx, h.prefix+"lost\x00", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost.Done():
	case <-ctx.Done():
		t.Fatal("the lease whose key was deleted never ended")
	}
	errs = append(errs, lost.Err(), lost.Refresh(ctx), lost.Release(ctx))
	r.Check(t, []string{h.password, wrong, rootPassword}, errs...)
}
