package launch

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Host ports are chosen here, not by Docker, so that servers can be told
// their published address before they start. They come from below the
// kernel's ephemeral range (32768 and up on Linux), where outgoing
// connections take their local ports and could take a killed server's port
// before it restarts.
const (
	PortLow  = 20000
	PortHigh = 32000 // exclusive
)

var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// FreePort returns a port in [PortLow, PortHigh) that no process has bound
// on any address, that no other process has been handed by FreePort and
// still runs (see reservePort), and that this process has not been handed
// before. Test packages run as processes side by side, and a port is often
// bound long after it is handed out — a container's published port once it
// starts, a proxy on the Docker bridge's gateway once the members it links
// are up — so that a check for a free port alone let two processes take
// the same one (a CI run's linked ensemble failed with "bind: address
// already in use" on the gateway). A process that is not Go's, binding
// such a port meanwhile, is still possible; the odds are small and the
// failure loud.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := PortLow + rand.IntN(PortHigh-PortLow)
		if ports[p] {
			continue
		}
		// The wildcard address conflicts with a listener on any address.
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		held, err := reservePort(p)
		if err != nil {
			return 0, err
		}
		if !held {
			continue
		}
		ports[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d", PortLow, PortHigh)
}

// FreePorts returns n ports of FreePort.
func FreePorts(n int) ([]int, error) {
	ps := make([]int, n)
	for i := range ps {
		var err error
		if ps[i], err = FreePort(); err != nil {
			return nil, err
		}
	}
	return ps, nil
}
