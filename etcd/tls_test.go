package etcd_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testcerts"
	"github.com/distlock/locker/internal/testenv"
)

// takeAndRelease proves l works: a lock taken, found held, released.
func takeAndRelease(t *testing.T, what string, l locker.Locker) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	lease, err := l.TryAcquire(ctx, "tls-k")
	if err != nil {
		t.Fatalf("%s: TryAcquire: %v", what, err)
	}
	if info, err := locker.Inspect(ctx, l, "tls-k"); err != nil || !info.Held || info.Token != lease.Token() {
		t.Fatalf("%s: Inspect = %+v, %v; want held with token %d", what, info, err, lease.Token())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("%s: Release: %v", what, err)
	}
}

// openURL opens url, failing t on an error.
func openURL(t *testing.T, url string) locker.Locker {
	t.Helper()
	l, err := locker.Open(ctxFor(t, 30*time.Second), url)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// wantRefused fails t unless Open(url) fails with an error saying one of
// reasons.
func wantRefused(t *testing.T, url string, reasons ...string) error {
	t.Helper()
	l, err := locker.Open(ctxFor(t, 30*time.Second), url)
	if err == nil {
		_ = l.Close()
		t.Fatalf("Open(%s) succeeded, want it refused", url)
	}
	for _, r := range reasons {
		if strings.Contains(err.Error(), r) {
			return err
		}
	}
	t.Errorf("Open(%s) = %v, want an error saying one of %q", url, err, reasons)
	return err
}

// clientCertServer starts an etcd demanding client certificates, and
// writes the CA and a client certificate ("client") into dir.
func clientCertServer(t *testing.T) (ca *testcerts.CA, srv *testenv.Server, client testcerts.Pair, dir string, h *harness) {
	t.Helper()
	ca = testcerts.NewCA(t, "etcd test CA")
	srv = testenv.EtcdTLS(t, ca, true)
	client = ca.Client(t, "app")
	dir = ca.WriteFiles(t, map[string]testcerts.Pair{"client": client})
	return ca, srv, client, dir, newHarness(srv.Addr())
}

// The server's certificate is verified against the test CA, through the
// URL (ca_file) and through a client configured in code (New); a client
// that does not trust the CA is refused with the x509 reason.
func TestTLS_ServerVerified_URLAndNew(t *testing.T) {
	ca := testcerts.NewCA(t, "etcd test CA")
	srv := testenv.EtcdTLS(t, ca, false)
	dir := ca.WriteFiles(t, nil)
	h := newHarness(srv.Addr())
	base := "etcd://" + srv.Addr() + "/" + h.prefix + "?dial_timeout=5s&"

	takeAndRelease(t, "URL with ca_file", openURL(t, base+"ca_file="+filepath.Join(dir, "ca.pem")))

	h.tls = ca.ClientTLS(t, nil)
	l, err := newLockerOn(h, h.newClient(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	takeAndRelease(t, "New over a TLS client", l)

	wantRefused(t, base+"tls=true", "x509", "certificate")
	other := testcerts.NewCA(t, "another CA")
	wantRefused(t, base+"ca_file="+filepath.Join(other.WriteFiles(t, nil), "ca.pem"), "x509", "certificate")
	wantRefused(t, "etcd://"+srv.Addr()+"/"+h.prefix+"?dial_timeout=5s", "no answer") // plain http to a TLS port
}

// With --client-cert-auth the server admits only clients showing a
// certificate the CA signed: cert_file and key_file in the URL, or the
// certificate in the client's tls.Config.
func TestTLS_ClientCertificate_Required(t *testing.T) {
	ca, srv, client, dir, h := clientCertServer(t)
	base := "etcd://" + srv.Addr() + "/" + h.prefix + "?dial_timeout=5s&ca_file=" + filepath.Join(dir, "ca.pem")

	takeAndRelease(t, "URL with a client certificate", openURL(t, base+
		"&cert_file="+filepath.Join(dir, "client.pem")+"&key_file="+filepath.Join(dir, "client-key.pem")))
	h.tls = ca.ClientTLS(t, &client)
	l, err := newLockerOn(h, h.newClient(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	takeAndRelease(t, "New with a client certificate", l)

	if err := wantRefused(t, base, "certificate required"); !errors.Is(err, locker.ErrUnauthorized) {
		t.Errorf("no client certificate: %v, want ErrUnauthorized", err)
	}
	// The client offers no certificate the server's CAs did not sign.
	stranger := testcerts.NewCA(t, "a stranger's CA").Client(t, "app")
	sdir := ca.WriteFiles(t, map[string]testcerts.Pair{"client": stranger})
	err = wantRefused(t, base+"&cert_file="+filepath.Join(sdir, "client.pem")+"&key_file="+filepath.Join(sdir, "client-key.pem"),
		"certificate required", "unknown certificate authority", "bad certificate")
	if !errors.Is(err, locker.ErrUnauthorized) {
		t.Errorf("a certificate from another CA: %v, want ErrUnauthorized", err)
	}
}

// User name and password over TLS with client certificates: the restricted
// user works, a wrong password is ErrUnauthorized.
func TestTLS_PasswordOverTLS(t *testing.T) {
	ca, srv, client, dir, h := clientCertServer(t)
	h.tls = ca.ClientTLS(t, &client)
	root := enableAuth(t, h)
	grantPrefix(t, root, "locks", "locks-Secret-91c2", h.prefix)
	q := "?dial_timeout=5s&ca_file=" + filepath.Join(dir, "ca.pem") +
		"&cert_file=" + filepath.Join(dir, "client.pem") + "&key_file=" + filepath.Join(dir, "client-key.pem")
	takeAndRelease(t, "password over TLS", openURL(t, "etcd://locks:locks-Secret-91c2@"+srv.Addr()+"/"+h.prefix+q))

	_, err := locker.Open(ctxFor(t, 30*time.Second), "etcd://locks:wrong@"+srv.Addr()+"/"+h.prefix+q)
	if !errors.Is(err, locker.ErrUnauthorized) {
		t.Fatalf("wrong password over TLS: %v, want ErrUnauthorized", err)
	}
}
