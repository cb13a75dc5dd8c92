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

// FreePort returns a port in [PortLow, PortHigh) free on 127.0.0.1 and not
// handed out before by this process. A port free now may be taken by another
// process before the container binds it; the odds are small and the failure
// loud.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := PortLow + rand.IntN(PortHigh-PortLow)
		if ports[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
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
