package testenv_test

import (
	"testing"

	"github.com/distlock/locker/internal/testenv"
)

// A majority partition disconnects two members and heals them in the
// other order. Each must come back at its own address: docker hands a
// freed address to whoever asks next, and swapped addresses left an etcd
// member on the old term for over a minute after the heal (the liveness
// failures of TestEtcdCluster/partition_a_majority, 6 in 65 runs).
func TestCluster_ReconnectInTheOtherOrder_KeepsAddresses(t *testing.T) {
	c := testenv.EtcdCluster(t)
	before := make(map[int]string)
	for i, s := range c.Nodes {
		before[i] = s.NetworkAddr(t).String()
	}
	c.Nodes[0].Disconnect(t)
	c.Nodes[1].Disconnect(t)
	c.Nodes[1].Reconnect(t)
	c.Nodes[0].Reconnect(t)
	for i, s := range c.Nodes {
		if got := s.NetworkAddr(t).String(); got != before[i] {
			t.Errorf("member %d came back at %s, was at %s", i+1, got, before[i])
		}
	}
}
