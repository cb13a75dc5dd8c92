package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	goredis "github.com/redis/go-redis/v9"
)

// The URL schemes this package registers with locker.Open.
const (
	Scheme        = "redis"   // one deployment: single server, Sentinel or Cluster
	SchemeTLS     = "rediss"  // the same over TLS
	SchemeRedlock = "redlock" // Redlock over independent masters, plain TCP
)

func init() {
	locker.Register(Scheme, locker.BackendOpener(open))
	locker.Register(SchemeTLS, locker.BackendOpener(open))
	locker.Register(SchemeRedlock, locker.BackendOpener(open))
}

// open makes a backend from a URL of one of the forms the package doc lists.
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalidURL("query: %v", err)
	}
	cfg := Config{CloseClients: true}
	cfg.Prefix = take(q, "prefix")
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, invalidURL("query parameter prefix=%q: may not contain '{' or '}'", cfg.Prefix)
	}
	if v := take(q, "node_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, invalidURL("query parameter node_timeout=%q: want a positive Go duration such as 50ms", v)
		}
		cfg.NodeTimeout = d
	}
	redlock, err := takeBool(q, "redlock")
	if err != nil {
		return nil, err
	}
	cluster, err := takeBool(q, "cluster")
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == SchemeRedlock {
		redlock, scheme = true, Scheme
	}
	hosts := strings.Split(u.Host, ",")
	for _, h := range hosts {
		if h == "" && len(hosts) > 1 {
			return nil, invalidURL("host %q: empty address in the comma-separated list", u.Host)
		}
	}
	sentinel := q.Get("master_name") != ""

	// The URL go-redis parses: our parameters removed, one host.
	base := *u
	base.Scheme = scheme
	base.RawQuery = q.Encode()
	// withHost gives that URL for host h, with more addresses as go-redis's
	// addr= parameters (Cluster seeds, further sentinels).
	withHost := func(h string, more ...string) string {
		v := base
		v.Host = h
		if len(more) > 0 {
			mq, _ := url.ParseQuery(base.RawQuery)
			mq["addr"] = append(mq["addr"], more...)
			v.RawQuery = mq.Encode()
		}
		return v.String()
	}

	switch {
	case redlock && (cluster || sentinel):
		return nil, invalidURL("query: redlock=true cannot be combined with cluster=true or master_name")
	case redlock:
		clients := make([]goredis.UniversalClient, 0, len(hosts))
		closeAll := func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
		for _, h := range hosts {
			o, err := goredis.ParseURL(withHost(h))
			if err != nil {
				closeAll()
				return nil, invalidURL("master %q: %v", h, err)
			}
			o.ContextTimeoutEnabled = true
			if o.MaxRetries == 0 {
				// A retried request would eat into the node timeout; a failed
				// master is what the quorum is for.
				o.MaxRetries = -1
			}
			clients = append(clients, goredis.NewClient(o))
		}
		r, err := newRedlock(clients, cfg)
		if err == nil {
			err = r.ping(ctx)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		return r, nil
	case sentinel:
		o, err := goredis.ParseFailoverURL(withHost(hosts[0], hosts[1:]...))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		return openSingle(ctx, goredis.NewFailoverClient(o), cfg)
	case cluster || len(hosts) > 1:
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, invalidURL("path %q: a Redis Cluster has no database number", u.Path)
		}
		o, err := goredis.ParseClusterURL(withHost(hosts[0], hosts[1:]...))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		return openSingle(ctx, goredis.NewClusterClient(o), cfg)
	default:
		o, err := goredis.ParseURL(withHost(hosts[0]))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		return openSingle(ctx, goredis.NewClient(o), cfg)
	}
}

func openSingle(ctx context.Context, c goredis.UniversalClient, cfg Config) (driver.Backend, error) {
	b, err := newBackend(c, cfg)
	if err == nil {
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return b, nil
}

// ping checks that a quorum of masters answers.
func (r *redlock) ping(ctx context.Context) error {
	res := make([]error, len(r.nodes))
	r.onAll(ctx, maxNodeTimeout*4, func(ctx context.Context, i int, c goredis.UniversalClient) {
		res[i] = c.Ping(ctx).Err()
	})
	var errs []error
	for i, err := range res {
		if err != nil {
			errs = append(errs, fmt.Errorf("master %d: %w", i, err))
		}
	}
	if len(errs) > len(r.nodes)-r.quorum {
		return fmt.Errorf("redlock: %d of %d masters unreachable, quorum %d: %w", len(errs), len(r.nodes), r.quorum, errors.Join(errs...))
	}
	return nil
}

func take(q url.Values, k string) string {
	v := q.Get(k)
	q.Del(k)
	return v
}

func takeBool(q url.Values, k string) (bool, error) {
	v, ok := q[k]
	if !ok {
		return false, nil
	}
	q.Del(k)
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return false, invalidURL("query parameter %s=%q: want true or false", k, v[0])
	}
	return b, nil
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: redis: "+format, append([]any{locker.ErrInvalidURL}, args...)...)
}
