package redis

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// backendName names this package's options (locker.BackendOption): New
// and NewRedlock take them, any other backend refuses them.
const backendName = "redis"

// config is what a constructor takes out of its options. The zero value is
// the default.
type config struct {
	// Prefix starts the name of every Redis key and channel the Locker uses
	// (default DefaultPrefix).
	Prefix string
	// NodeTimeout bounds each request to one Redlock master (0: a tenth of
	// the lease's TTL, at most 250 ms). Unused by New.
	NodeTimeout time.Duration
	// AcceptEviction lets the Locker run on a server whose maxmemory-policy
	// may evict its keys.
	AcceptEviction bool
	// AllowFewMasters lets a Redlock run on 1 or 2 distinct masters.
	AllowFewMasters bool
	// CloseClients makes Close close the client(s): set by Open only, for
	// the clients it makes.
	CloseClients bool
	// Logger gets what the backend's background work has to say.
	Logger *slog.Logger
}

// setting is one of this package's options, applied to a config.
type setting func(*config)

func option(s setting) locker.Option { return locker.BackendOption(backendName, s) }

// WithPrefix starts the name of every Redis key and channel of the Locker
// with p instead of DefaultPrefix; Lockers that must exclude each other
// share a prefix. p may not contain '{' or '}' (they would change the
// Cluster hash tag), nor end in "guard:" (the Guards' key space). URL query
// parameter: prefix.
func WithPrefix(p string) locker.Option { return option(func(c *config) { c.Prefix = p }) }

// WithNodeTimeout bounds each request to one Redlock master (default: a
// tenth of the lease's TTL, at most 250 ms), so that a slow or dead master
// costs a round little of the lease's validity. New ignores it. URL query
// parameter: node_timeout (a Go duration).
func WithNodeTimeout(d time.Duration) locker.Option {
	return option(func(c *config) { c.NodeTimeout = d })
}

// WithAcceptEviction(true) lets a Locker run on a server whose
// maxmemory-policy evicts keys (allkeys-* or volatile-*). Such a server may
// delete a held lock under memory pressure and grant it to a second owner:
// New refuses it on the first request unless this option says the caller
// knows. Fencing tokens still increase (the clock floor), so a guarded
// resource still refuses the older holder once the newer one wrote. A user
// that may not read the policy (no +config|get, as a lock user should be)
// is refused with locker.ErrUnauthorized unless this vouches for it; with
// it, the policy is not read at all. URL query parameter: accept_eviction.
func WithAcceptEviction(accept bool) locker.Option {
	return option(func(c *config) { c.AcceptEviction = accept })
}

// WithAllowFewMasters(true) lets NewRedlock run on 1 or 2 distinct masters.
// By default it needs 3: with fewer, the quorum is every master, so that one
// master's failure stops all locking. New ignores it. URL query parameter:
// allow_few_masters.
func WithAllowFewMasters(allow bool) locker.Option {
	return option(func(c *config) { c.AllowFewMasters = allow })
}

// closeClients is Open's: the Locker owns the clients Open made.
func closeClients() locker.Option { return option(func(c *config) { c.CloseClients = true }) }

// splitOptions takes this package's settings out of opts, checks them, and
// returns the rest for locker.New.
func splitOptions(opts []locker.Option) (config, []locker.Option, error) {
	bc := locker.SplitOptions(backendName, opts)
	cfg := config{Logger: bc.Logger}
	for _, s := range bc.Settings {
		if f, ok := s.(setting); ok {
			f(&cfg)
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := checkLockerPrefix(cfg.Prefix); err != nil {
		return config{}, nil, err
	}
	if cfg.NodeTimeout < 0 {
		return config{}, nil, fmt.Errorf("%w: redlock node timeout %v is negative", locker.ErrInvalidOption, cfg.NodeTimeout)
	}
	return cfg, bc.Options, nil
}

// newLocker makes the Locker of a backend built from the options' settings;
// the backend is closed if locker.New refuses the rest.
func newLocker[B driver.Backend](opts []locker.Option, build func(config) (B, error)) (locker.Locker, error) {
	cfg, rest, err := splitOptions(opts)
	if err != nil {
		return nil, err
	}
	b, err := build(cfg)
	if err != nil {
		return nil, err
	}
	l, err := locker.New(b, rest...)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return l, nil
}

// ErrEvictingPolicy is wrapped (with locker.ErrInvalidOption) by the error of
// a Locker or Guard on a server whose maxmemory-policy may evict its keys,
// unless WithAcceptEviction or WithGuardAcceptEviction says to accept it.
var ErrEvictingPolicy = errors.New("redis: the server's maxmemory-policy evicts keys, which may free a held lock")
