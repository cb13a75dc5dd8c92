package locker

import (
	"fmt"
	"log/slog"
	"time"
)

// DefaultTTL is the lease time to live when no WithTTL option is given.
const DefaultTTL = 15 * time.Second

// MinTTL is the shortest TTL any Locker accepts: below it the drift margin
// (DriftMargin) would leave a lease no validity at all. Backends may require
// more (driver.TTLRounder).
const MinTTL = 10 * time.Millisecond

// An Option configures a Locker (given to New or Open: it then applies to every
// lease) or one acquisition (given to Acquire, TryAcquire or Do: it overrides
// the Locker's setting for that lease).
type Option func(*options)

type options struct {
	ttl         time.Duration
	autoRefresh bool
	owner       string
	namespace   string
	logger      *slog.Logger
	err         error // the first invalid option, reported by the call using them
}

func defaultOptions() options {
	return options{ttl: DefaultTTL}
}

func (o *options) apply(opts []Option) {
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
}

func (o *options) invalid(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
	}
}

// WithTTL sets the lease time to live (default DefaultTTL). It must be at
// least MinTTL. A TTL the backend cannot honour exactly is rounded up, never
// down, or refused with ErrInvalidOption.
func WithTTL(d time.Duration) Option {
	return func(o *options) {
		if d < MinTTL {
			o.invalid("TTL %v is shorter than the minimum %v", d, MinTTL)
			return
		}
		o.ttl = d
	}
}

// WithAutoRefresh makes the lease refresh itself in the background, at a third
// of its TTL, until it is released or lost (default off; Do turns it on).
func WithAutoRefresh(on bool) Option {
	return func(o *options) { o.autoRefresh = on }
}

// WithOwner sets a human-readable label for the holder, stored with the lock
// where the backend can, for inspection. It does not take part in ownership
// checks: those use a random 128-bit id per lease.
func WithOwner(label string) Option {
	return func(o *options) {
		if len(label) > MaxKeyLen {
			o.invalid("owner label of %d bytes, more than %d", len(label), MaxKeyLen)
			return
		}
		o.owner = label
	}
}

// WithNamespace puts keys in a key space of their own: the same key in two
// namespaces names two independent locks, and no key of one namespace can
// collide with a key of another or with a key outside any namespace. The
// namespace follows the rules of keys (ValidateKey); "" means none.
func WithNamespace(prefix string) Option {
	return func(o *options) {
		if prefix == "" {
			o.namespace = ""
			return
		}
		if err := ValidateKey(prefix); err != nil {
			o.invalid("namespace: %v", err)
			return
		}
		o.namespace = prefix
	}
}

// WithLogger sets where the Locker logs what it does in the background
// (refresh failures, clean-up after loss). Logging is off by default.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}
