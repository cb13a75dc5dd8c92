package launch

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/moby/moby/client"
)

// Gateway returns the network's gateway: the test machine's own address on
// it, which its containers reach and the test process can listen on.
func (n *Network) Gateway(ctx context.Context) (netip.Addr, error) {
	r, err := n.d.cli.NetworkInspect(ctx, n.ID, client.NetworkInspectOptions{})
	if err != nil {
		return netip.Addr{}, err
	}
	for _, c := range r.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("network %s has no IPv4 gateway", n.Name)
}
