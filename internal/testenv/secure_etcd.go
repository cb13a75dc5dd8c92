package testenv

import (
	"testing"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testcerts"
)

// EtcdPrivate starts an etcd 3.6 member of the calling test's own, plain
// (no TLS), for tests that change the server's state for good — enabling
// authentication, say — and so cannot share Etcd's. Its bcrypt cost is
// etcd's minimum, 4: with a password every client, watch stream and
// keep-alive stream logs in (a bcrypt check), and a suite that makes
// hundreds of clients on a loaded machine would otherwise time out in
// log-ins (see docs/design/security-etcd.md).
func EtcdPrivate(t testing.TB) *Server {
	t.Helper()
	return Private(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img Images, port int) launch.Spec {
		sp := launch.EtcdSingle(img.Etcd, nil, port)
		sp.Cmd = append(sp.Cmd, "--bcrypt-cost", "4")
		return sp
	})
}

// EtcdTLS starts an etcd 3.6 member of the calling test's own serving
// clients over TLS, with a certificate ca issued for 127.0.0.1; with
// clientCertAuth every client must present a certificate ca signed.
func EtcdTLS(t testing.TB, ca *testcerts.CA, clientCertAuth bool) *Server {
	t.Helper()
	server := ca.Server(t)
	var probe *testcerts.Pair
	if clientCertAuth {
		p := ca.Client(t, "probe")
		probe = &p
	}
	return Private(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img Images, port int) launch.Spec {
		return launch.EtcdSecureSingle(img.Etcd, port, launch.EtcdTLS{
			CertPEM: server.CertPEM, KeyPEM: server.KeyPEM, CAPEM: ca.CertPEM,
			ClientCertAuth: clientCertAuth, Client: ca.ClientTLS(t, probe),
		})
	})
}
