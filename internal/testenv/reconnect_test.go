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

// A fault control that reports an error may still have done its work
// (dockerd answered late, say), and the nemesis retries it: a CI run's
// retried Disconnect found the member already off the network ("etcd
// container has no address on network …") and, never healed, failed the
// next fault's runs too. Disconnect and Reconnect done twice do them once.
func TestCluster_DisconnectAndReconnectTwice_DoThemOnce(t *testing.T) {
	c := testenv.EtcdCluster(t)
	m := c.Nodes[2]
	before := m.NetworkAddr(t).String()
	m.Disconnect(t)
	m.Disconnect(t)
	m.Reconnect(t)
	m.Reconnect(t)
	if got := m.NetworkAddr(t).String(); got != before {
		t.Errorf("member 3 came back at %s, was at %s", got, before)
	}
}
