package locker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/locker/driver"
)

// An Opener makes a Locker from a URL of the scheme it was registered for.
// The query parameters that locker itself reads (ttl, namespace, owner) have
// been removed from u and turned into the first of opts; the options given to
// Open follow them, so they win. Every other query parameter is one of the
// backend's own options, under the same name. An Opener returns an error
// wrapping ErrInvalidURL for a URL it cannot use, naming the part that is
// wrong; the Locker it returns owns the client it made from the URL.
type Opener func(ctx context.Context, u *url.URL, opts []Option) (Locker, error)

// BackendOpener is an Opener for a backend whose URL alone makes its
// driver.Backend: the options go to New. A backend with options of its own
// writes an Opener that passes them to its constructor.
func BackendOpener(open func(ctx context.Context, u *url.URL) (driver.Backend, error)) Opener {
	return func(ctx context.Context, u *url.URL, opts []Option) (Locker, error) {
		b, err := open(ctx, u)
		if err != nil {
			return nil, err
		}
		l, err := New(b, opts...)
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		return l, nil
	}
}

// knownImports are the packages of this module that register each scheme,
// for the error that tells a user which import is missing.
var knownImports = map[string]string{
	"memory":     "github.com/distlock/locker/memory",
	"redis":      "github.com/distlock/locker/redis",
	"rediss":     "github.com/distlock/locker/redis",
	"redlock":    "github.com/distlock/locker/redis",
	"etcd":       "github.com/distlock/locker/etcd",
	"zookeeper":  "github.com/distlock/locker/zookeeper",
	"postgres":   "github.com/distlock/locker/postgres",
	"postgresql": "github.com/distlock/locker/postgres",
}

var registry = struct {
	sync.RWMutex
	openers map[string]Opener
}{openers: map[string]Opener{}}

// Register makes a backend available to Open under a URL scheme. Backends
// call it from init, as database/sql drivers do. Registering a scheme twice,
// or a nil Opener, panics: it is a programming error found at start-up.
func Register(scheme string, opener Opener) {
	registry.Lock()
	defer registry.Unlock()
	scheme = strings.ToLower(scheme)
	if opener == nil {
		panic("locker: Register opener is nil for scheme " + scheme)
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("locker: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = opener
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens a Locker from a URL, such as "memory://", "redis://host:6379/0",
// "etcd://h1:2379,h2:2379/prefix" or "postgres://user@host/db". The backend
// for the scheme must have been registered, usually by importing its package
// for its side effect:
//
//	import _ "github.com/distlock/locker/redis"
//
// Besides each backend's own parameters, every URL accepts these query
// parameters, which set Locker-wide defaults: ttl (a Go duration, e.g. 30s),
// namespace, and owner. Options given to Open override them.
//
// A malformed URL returns an error wrapping ErrInvalidURL that names the
// wrong part; a backend that cannot be reached returns one wrapping
// ErrUnavailable.
func Open(ctx context.Context, rawURL string, opts ...Option) (Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidURL, parseComplaint(rawURL, err))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: missing scheme (want scheme://…, one of %s)", ErrInvalidURL, strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	opener := registry.openers[strings.ToLower(u.Scheme)]
	registry.RUnlock()
	if opener == nil {
		if pkg, ok := knownImports[strings.ToLower(u.Scheme)]; ok {
			return nil, fmt.Errorf("%w: scheme %q is not registered: add import _ %q", ErrInvalidURL, u.Scheme, pkg)
		}
		return nil, fmt.Errorf("%w: unknown scheme %q (registered: %s; forgotten import?)",
			ErrInvalidURL, u.Scheme, strings.Join(Schemes(), ", "))
	}
	urlOpts, err := commonQuery(rawURL, u)
	if err != nil {
		return nil, err
	}
	l, err := opener(ctx, u, append(urlOpts, opts...))
	if err != nil {
		return nil, wrapError(ctx, u.Scheme, "open", "", err)
	}
	return l, nil
}

// commonQuery takes the parameters every scheme shares out of u's query;
// rawURL is u as given, for errors.
func commonQuery(rawURL string, u *url.URL) ([]Option, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %s", ErrInvalidURL, parseComplaint(rawURL, err))
	}
	var opts []Option
	if v, ok := q["ttl"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: query parameter ttl=%q: want a positive Go duration such as 30s", ErrInvalidURL, v[0])
		}
		opts = append(opts, WithTTL(d))
	}
	if v, ok := q["namespace"]; ok {
		if err := ValidateKey(v[0]); err != nil {
			return nil, fmt.Errorf("%w: query parameter namespace: %v", ErrInvalidURL, err)
		}
		opts = append(opts, WithNamespace(v[0]))
	}
	if v, ok := q["owner"]; ok {
		opts = append(opts, WithOwner(v[0]))
	}
	for _, k := range []string{"ttl", "namespace", "owner"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return opts, nil
}

// parseComplaint is what Open says of a URL that net/url refused: the
// parser's message without the whole URL (a url.Error repeats it), and
// without the piece the parser quotes (a port, an escape, a character) when
// that piece may be part of a password — the user info, up to the last '@',
// or the value of a query parameter named like password. A password with an
// unescaped '/', '?' or '#' ends the authority inside the password, whose
// first part the parser then quotes as a bad port.
func parseComplaint(rawURL string, err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return msg
	}
	q, qerr := strconv.QuotedPrefix(msg[i:])
	piece, uerr := strconv.Unquote(q)
	if qerr != nil || uerr != nil || mayHoldSecret(rawURL, piece) {
		return "malformed URL around its password (a password must percent-encode / ? # @ : % and spaces)"
	}
	return msg
}

// mayHoldSecret reports whether piece occurs where rawURL may carry a
// secret.
func mayHoldSecret(rawURL, piece string) bool {
	rest := rawURL
	if _, after, ok := strings.Cut(rawURL, "://"); ok {
		rest = after
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 && strings.Contains(rest[:at], piece) {
		return true
	}
	_, query, _ := strings.Cut(rest, "?")
	for kv := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if strings.Contains(strings.ToLower(k), "password") && strings.Contains(v, piece) {
			return true
		}
	}
	return false
}
