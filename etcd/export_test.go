package etcd

import (
	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewWithBackend is New that also returns the Locker's backend, so that a
// test can call its optional abilities with arguments the portable layer
// does not choose (a List page size, a Watch left to break).
func NewWithBackend(cli *clientv3.Client, opts ...locker.Option) (locker.Locker, driver.Backend, error) {
	c, err := splitOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	b := newBackend(cli, c, false)
	l, err := locker.New(b, c.rest...)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return l, b, nil
}

// Wakeups reports how many times waiting Acquires of this process have
// re-checked their place.
func Wakeups() int64 { return wakeups.Load() }
