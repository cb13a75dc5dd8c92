package locker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTTL is the lease time to live when no WithTTL option is given.
const DefaultTTL = 15 * time.Second

// MinTTL is the shortest TTL any Locker accepts: below it the drift margin
// (driver.DriftMargin) would leave a lease no validity at all. Backends may
// require more (driver.TTLRounder).
const MinTTL = 10 * time.Millisecond

// An Option configures a Locker (given to a backend's New or to Open: it then
// applies to every lease) or one acquisition (given to Acquire, TryAcquire or
// Do: it overrides the Locker's setting for that lease). Options that only
// make sense for a whole Locker — WithLogger and every backend's own options
// — are refused with ErrInvalidOption when given per call.
type Option func(*options)

type options struct {
	ttl         time.Duration
	autoRefresh bool
	owner       string
	value       string // published with the lease (WithValue)
	minHold     time.Duration
	namespace   string
	logger      *slog.Logger
	backend     []backendSetting // backend options, for the backend's constructor

	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	keyAttr        bool
	limit          int // holders a key admits at once (WithLimit); 1 for a lock

	lockerWide string // the last Locker-wide option seen, for the per-call check
	err        error  // the first invalid option, reported by the call using them
}

// backendSetting is one backend's own option (BackendOption).
type backendSetting struct {
	backend string
	setting any
}

func defaultOptions() options {
	return options{ttl: DefaultTTL, autoRefresh: true, limit: 1}
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

// WithAutoRefresh sets whether a lease refreshes itself in the background, at
// a third of its TTL, until it is released, lost or its Locker closed
// (default on, as etcd sessions and Redisson's watchdog do). The refreshes run
// on a timer: a held lease has no goroutine of its own. With it off, a lease
// ends at its Deadline unless the holder calls Refresh.
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
// (refresh failures, clean-up after loss), its backend's background work and
// the engine client it creates from a URL included. Logging is off by
// default. It is a Locker-wide option: refused per call.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger, o.lockerWide = l, "WithLogger" }
}

// WithLimit makes the key an N-permit lock, a semaphore: at most n holders
// at once, each lease a full lease of its own (TTL, refresh, Done, Release)
// with a token unique and strictly increasing per key across all permits.
// The limit is stored with the key while it is held or waited for: an
// acquisition asking another limit is refused with ErrInvalidOption. n = 1
// (the default) is a lock. A backend without permits refuses n > 1 with
// ErrUnsupported (README.md says which have them). A fencing guard that keeps
// the highest token does not fit n concurrent holders: see package fencing.
func WithLimit(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.invalid("limit %d: a key admits at least one holder", n)
			return
		}
		o.limit = n
	}
}

// WithMinHold keeps the lock held on the server for at least d after it was
// granted: a Release before then ends the lease but not the lock, which the
// server frees once d has passed since the grant, without this client
// having to stay alive; a holder that crashes leaves it held until the later
// of d and its TTL's end. A job scheduled on every replica then runs at most
// once per d (TryAcquire, run, Release), and N permits with a minimum hold of
// 1/r cap a resource at N·r starts a second. 0 (the default) is none. A
// backend that cannot keep a lock past its holder refuses it with
// ErrUnsupported (README.md says which can).
func WithMinHold(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.invalid("minimum hold %v is negative", d)
			return
		}
		o.minHold = d
	}
}

// MaxValue is the largest value WithValue and Publish accept, in bytes.
const MaxValue = 4096

// WithValue publishes v with the lease: Inspect, List and Watch show it, and
// Publish replaces it while the lease is held (package election proclaims
// its leader's value this way). v is valid UTF-8 of at most MaxValue bytes.
// A backend that cannot store a value refuses a non-empty one with
// ErrUnsupported (README.md says which can).
func WithValue(v string) Option {
	return func(o *options) {
		if err := validateValue(v); err != nil {
			o.invalid("%v", err)
			return
		}
		o.value = v
	}
}

func validateValue(v string) error {
	if len(v) > MaxValue {
		return fmt.Errorf("value of %d bytes: at most %d", len(v), MaxValue)
	}
	if !utf8.ValidString(v) {
		return errors.New("value is not valid UTF-8")
	}
	return nil
}

// WithMeterProvider sets where the Locker reports its metrics (default: the
// global provider, otel.GetMeterProvider, which does nothing until the
// application installs an SDK). README.md lists the instruments. It is a
// Locker-wide option.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider, o.lockerWide = p, "WithMeterProvider" }
}

// WithTracerProvider sets where the Locker reports its spans (default: the
// global provider, otel.GetTracerProvider). It is a Locker-wide option.
func WithTracerProvider(p trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider, o.lockerWide = p, "WithTracerProvider" }
}

// WithKeyAttribute adds the key as an attribute (locker.key) to every
// metric and span (default off: one time series per key can be too many).
// It is a Locker-wide option.
func WithKeyAttribute(on bool) Option {
	return func(o *options) { o.keyAttr, o.lockerWide = on, "WithKeyAttribute" }
}

// BackendOption makes an Option that carries a setting of one backend's own,
// such as redis.WithPrefix, so that a backend's New takes one list of
// options. It is for backend packages, which define their options with it
// and take them out with SplitOptions. A backend option is Locker-wide:
// given per call, or to a Locker of another backend, it is refused with
// ErrInvalidOption.
func BackendOption(backend string, setting any) Option {
	return func(o *options) {
		o.backend = append(o.backend, backendSetting{backend, setting})
		o.lockerWide = backend + " option"
	}
}

// BackendConfig is what a backend's constructor takes out of its options
// (SplitOptions).
type BackendConfig struct {
	// Settings are the backend's own settings (BackendOption), in order.
	Settings []any
	// Logger is WithLogger's logger, or one that discards: never nil.
	Logger *slog.Logger
	// Options are all other options, to pass on to New.
	Options []Option
}

// SplitOptions takes the settings of backend out of opts, for a backend's
// constructor. Options of other backends stay in Options, where New refuses
// them.
func SplitOptions(backend string, opts []Option) BackendConfig {
	cfg := BackendConfig{Logger: discard}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		var one options
		opt(&one)
		if len(one.backend) == 1 && one.backend[0].backend == backend {
			cfg.Settings = append(cfg.Settings, one.backend[0].setting)
			continue
		}
		if one.logger != nil {
			cfg.Logger = one.logger
		}
		cfg.Options = append(cfg.Options, opt)
	}
	return cfg
}

var discard = slog.New(slog.DiscardHandler)

// perCall applies options given to one call over the Locker's, refusing the
// Locker-wide ones.
func (o *options) perCall(opts []Option) {
	if len(opts) == 0 {
		return
	}
	var own options
	own.apply(opts)
	if own.lockerWide != "" {
		o.invalid("%s is a Locker-wide option: give it to New or Open, not to a call", own.lockerWide)
	}
	o.apply(opts)
}

// foreign reports a backend option left over after the backend's constructor
// took its own (SplitOptions).
func (o *options) foreign(name string) {
	for _, s := range o.backend {
		o.invalid("an option of backend %q given to a %s Locker", s.backend, name)
	}
}
