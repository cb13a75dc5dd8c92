package etcd

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/locker"
)

// DefaultRequestTimeout bounds each request the backend sends when
// WithRequestTimeout is not given.
const DefaultRequestTimeout = 5 * time.Second

// The settings carried by this package's options (locker.BackendOption).
type (
	prefixSetting         string
	requestTimeoutSetting time.Duration
)

// WithPrefix sets the etcd key prefix under which the Locker keeps its locks
// (default DefaultPrefix; a '/' is appended when missing; URL: the path).
// Lockers with different prefixes are independent, even when one prefix
// extends the other. A prefix holding NUL is refused.
func WithPrefix(prefix string) locker.Option {
	return locker.BackendOption(Scheme, prefixSetting(prefix))
}

// WithRequestTimeout bounds every single request (a txn, a lease grant or
// renewal, one re-check while waiting) so that an unreachable cluster is
// reported as locker.ErrUnavailable instead of blocking until the caller's
// context ends (the etcd client waits for a connection by default). Waiting
// for a lock is not bounded by it. Default DefaultRequestTimeout; URL
// parameter request_timeout.
func WithRequestTimeout(d time.Duration) locker.Option {
	return locker.BackendOption(Scheme, requestTimeoutSetting(d))
}

// config is the backend's settings, taken out of an option list.
type config struct {
	prefix         string
	requestTimeout time.Duration
	logger         *slog.Logger
	rest           []locker.Option // for locker.New
}

// splitOptions takes this package's settings out of opts and checks them.
func splitOptions(opts []locker.Option) (config, error) {
	bc := locker.SplitOptions(Scheme, opts)
	c := config{requestTimeout: DefaultRequestTimeout, logger: bc.Logger, rest: bc.Options}
	for _, s := range bc.Settings {
		switch s := s.(type) {
		case prefixSetting:
			c.prefix = string(s)
		case requestTimeoutSetting:
			if s <= 0 {
				return c, fmt.Errorf("%w: etcd: request timeout %v is not positive", locker.ErrInvalidOption, time.Duration(s))
			}
			c.requestTimeout = time.Duration(s)
		}
	}
	var err error
	c.prefix, err = normalizePrefix(c.prefix)
	return c, err
}
