package zookeeper

import (
	"net"
	"sync"
)

// liveConns holds the connections an owned zk.Conn has dialed and not yet
// closed, so that Close can end them. go-zookeeper's Close does not close a
// connection whose handshake waits for a server that accepted it and says
// nothing (one starting up, or behind a dead router): its connection loop
// would go on reading, past the Locker, until ten receive timeouts passed.
type liveConns struct {
	mu     sync.Mutex
	closed bool
	conns  map[*liveConn]struct{}
}

// track returns c, tracked; once closeAll has run it closes c instead.
func (l *liveConns) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, errClosed
	}
	lc := &liveConn{Conn: c, owner: l}
	if l.conns == nil {
		l.conns = make(map[*liveConn]struct{})
	}
	l.conns[lc] = struct{}{}
	return lc, nil
}

// closeAll closes every tracked connection and refuses new ones.
func (l *liveConns) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

type liveConn struct {
	net.Conn
	owner *liveConns
}

func (c *liveConn) Close() error {
	c.owner.mu.Lock()
	delete(c.owner.conns, c)
	c.owner.mu.Unlock()
	return c.Conn.Close()
}
