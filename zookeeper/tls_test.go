package zookeeper_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testcerts"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/zookeeper"
)

// TLS on the server's secure client port (Netty), the client certificate
// required, with digest authentication on top: the URL's TLS parameters and
// the WithTLS option both reach it, and a client that does not verify as
// asked, or speaks plain text, gets no session.
func TestTLS_SecureClientPort_URLAndOption(t *testing.T) {
	ca := testcerts.NewCA(t, "zookeeper tests")
	srv := ca.Server(t)
	client := ca.Client(t, "alice")
	s, secure := testenv.SecureZooKeeper(t, launch.ZooKeeperTLS{CertPEM: srv.CertPEM, KeyPEM: srv.KeyPEM, CAPEM: ca.CertPEM})
	files := ca.WriteFiles(t, map[string]testcerts.Pair{"client": client})
	tlsQuery := "ca_file=" + filepath.Join(files, "ca.pem") + "&cert_file=" + filepath.Join(files, "client.pem") +
		"&key_file=" + filepath.Join(files, "client-key.pem")
	root := topRoot(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := openURL(t, authURL([]string{secure}, "alice", "pw", root, tlsQuery))
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if info, err := locker.Inspect(ctx, l, "k"); err != nil || info.Token != lease.Token() {
		t.Fatalf("Inspect over TLS: %+v, %v", info, err)
	}
	// The same server through its plain port: the nodes are the digest
	// identity's alone.
	wantOnlyDigest(t, authConn(t, []string{s.Addr()}, "alice", "pw"), root, "alice", "pw")

	// The option, with the configuration made in code.
	lo := dial(t, []string{secure}, root, zookeeper.WithTLS(ca.ClientTLS(t, &client)), zookeeper.WithDigest("alice", "pw"))
	if _, err := lo.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire of a held key through WithTLS = %v, want ErrLocked", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}

	other := testcerts.NewCA(t, "another CA")
	otherFiles := other.WriteFiles(t, nil)
	for name, c := range map[string]struct{ url, inErr string }{
		"plain text to the TLS port": {zkURL([]string{secure}, root), ""},
		"server certificate from an unknown CA": {authURL([]string{secure}, "alice", "pw", root,
			strings.Replace(tlsQuery, files+"/ca.pem", otherFiles+"/ca.pem", 1)), "certificate"},
		"no client certificate": {authURL([]string{secure}, "alice", "pw", root, "ca_file="+filepath.Join(files, "ca.pem")), "tls"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := locker.Open(ctx, c.url+"&connect_timeout=3s")
		if err == nil {
			_, err = l.TryAcquire(ctx, "k")
			_ = l.Close()
		}
		cancel()
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, locker.ErrUnavailable) || !strings.Contains(err.Error(), c.inErr) {
			t.Errorf("%s: %v, want ErrUnavailable saying %q", name, err, c.inErr)
		}
	}
}
