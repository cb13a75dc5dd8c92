package etcd_test

import (
	"testing"

	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/testenv"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness(testenv.Etcd(t).Addr()))
}

func TestConformance_ThreeMemberCluster(t *testing.T) {
	conformance.Run(t, newHarness(testenv.EtcdCluster(t).Addrs()...))
}

// TestConformance_Etcd34 is the compatibility run against Debian's etcd
// 3.4.23 server.
func TestConformance_Etcd34(t *testing.T) {
	conformance.Run(t, newHarness(testenv.Etcd34(t).Addr()))
}
