package zookeeper

import (
	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
)

// NewOwning is New for tests, whose Locker closes conn when it closes: the
// conformance suite reaches optional abilities only through a Locker of
// package locker itself, not one wrapped to close the connection.
func NewOwning(conn *zk.Conn, opts ...locker.Option) (locker.Locker, error) {
	return newOver(conn, true, opts)
}

// Wakeups reports how many times waiting Acquires of this process have
// read their queue again.
func Wakeups() int64 { return wakeups.Load() }
