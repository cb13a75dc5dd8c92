package testenv

import (
	"testing"

	"github.com/distlock/locker/internal/launch"
)

// SecureZooKeeper starts a ZooKeeper 3.8 server private to the calling test
// (see launch.SecureZooKeeper) with the server certificate z.CertPEM/KeyPEM
// and client certificates checked against z.CAPEM (z.ClientAuth); z's
// SecurePort is chosen here. It returns the server (Addr: the plain client
// port) and the address of the TLS client port.
func SecureZooKeeper(t testing.TB, z launch.ZooKeeperTLS) (*Server, string) {
	t.Helper()
	var secure string
	s := Private(t, "zookeeper", "LOCKER_TEST_ZOOKEEPER_ADDR", func(img Images, port int) launch.Spec {
		p, err := launch.FreePort()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		z.SecurePort = p
		sp := launch.SecureZooKeeper(img.Server, port, z, launch.ZooKeeperOptions{JVM: zkJVM})
		secure = sp.Services[1].Addr()
		return sp
	})
	return s, secure
}
