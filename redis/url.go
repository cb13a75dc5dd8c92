package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/urltls"
	goredis "github.com/redis/go-redis/v9"
)

// The URL schemes this package registers with locker.Open.
const (
	Scheme        = "redis"   // one deployment: single server, Sentinel or Cluster
	SchemeTLS     = "rediss"  // the same over TLS
	SchemeRedlock = "redlock" // Redlock over independent masters, plain TCP
)

func init() {
	locker.Register(Scheme, open)
	locker.Register(SchemeTLS, open)
	locker.Register(SchemeRedlock, open)
}

// open makes a Locker from a URL of one of the forms the package doc lists:
// each of this package's query parameters becomes the option of the same
// name, before opts (so the caller's options win); the clients it makes are
// the Locker's, closed by its Close.
func open(ctx context.Context, u *url.URL, opts []locker.Option) (locker.Locker, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalidURL("query: %v", err)
	}
	if err := checkClientParams(q); err != nil {
		return nil, err
	}
	own := []locker.Option{closeClients()}
	if q.Has("prefix") {
		p := take(q, "prefix")
		if err := checkLockerPrefix(p); err != nil {
			return nil, invalidURL("query parameter prefix=%q: may not contain '{' or '}', nor end in %q", p, guardSpace)
		}
		own = append(own, WithPrefix(p))
	}
	if v := take(q, "node_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, invalidURL("query parameter node_timeout=%q: want a positive Go duration such as 50ms", v)
		}
		own = append(own, WithNodeTimeout(d))
	}
	if q.Has("accept_eviction") {
		accept, err := takeBool(q, "accept_eviction")
		if err != nil {
			return nil, err
		}
		own = append(own, WithAcceptEviction(accept))
	}
	if q.Has("allow_few_masters") {
		allow, err := takeBool(q, "allow_few_masters")
		if err != nil {
			return nil, err
		}
		own = append(own, WithAllowFewMasters(allow))
	}
	opts = append(own, opts...)
	tlsConf, err := takeTLS(q)
	if err != nil {
		return nil, err
	}
	isRedlock, err := takeBool(q, "redlock")
	if err != nil {
		return nil, err
	}
	cluster, err := takeBool(q, "cluster")
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == SchemeRedlock {
		isRedlock, scheme = true, Scheme
	}
	hosts := strings.Split(u.Host, ",")
	for _, h := range hosts {
		if h == "" && len(hosts) > 1 {
			return nil, invalidURL("host %q: empty address in the comma-separated list", u.Host)
		}
	}
	sentinel := q.Get("master_name") != ""
	sentinelCreds, err := takeSentinelAuth(q, sentinel)
	if err != nil {
		return nil, err
	}
	auth, err := takeMasterAuth(q, len(hosts))
	if err != nil {
		return nil, err
	}
	if len(auth) > 0 && !isRedlock {
		return nil, invalidURL("query: username_N and password_N name Redlock masters (redlock=true or redlock://)")
	}

	if tlsConf != nil {
		scheme = SchemeTLS // tls=true or a file: TLS on redis:// and redlock:// too
	}
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
	case isRedlock && (cluster || sentinel):
		return nil, invalidURL("query: redlock=true cannot be combined with cluster=true or master_name")
	case cluster && sentinel:
		return nil, invalidURL("query: cluster=true cannot be combined with master_name (Sentinel)")
	case isRedlock:
		clients := make([]goredis.UniversalClient, 0, len(hosts))
		closeAll := func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
		for i, h := range hosts {
			o, err := goredis.ParseURL(withHost(h))
			if err != nil {
				closeAll()
				return nil, invalidURL("master %q: %v", h, err)
			}
			o.ContextTimeoutEnabled = true
			o.TLSConfig = withTLS(tlsConf, o.TLSConfig)
			if a, ok := auth[i+1]; ok {
				if a.user != nil {
					o.Username = *a.user
				}
				if a.password != nil {
					o.Password = *a.password
				}
			}
			if o.MaxRetries == 0 {
				// A retried request would eat into the node timeout; a failed
				// master is what the quorum is for.
				o.MaxRetries = -1
			}
			clients = append(clients, goredis.NewClient(o))
		}
		l, err := newLocker(opts, func(cfg config) (*redlock, error) {
			r, err := newRedlock(clients, cfg)
			if errors.Is(err, locker.ErrInvalidOption) {
				err = invalidURL("host %q: %v", u.Host, err)
			}
			if err == nil {
				err = r.ping(ctx)
			}
			for _, c := range clients {
				// The masters that answered; ping judged the others.
				if err == nil {
					e := evictionCheck{accept: cfg.AcceptEviction, logger: cfg.Logger}
					if cerr := e.check(ctx, c); errors.Is(cerr, ErrEvictingPolicy) || errors.Is(cerr, locker.ErrUnauthorized) {
						err = cerr
					}
				}
			}
			return r, err
		})
		if err != nil {
			closeAll()
			return nil, err
		}
		return l, nil
	case sentinel:
		o, err := goredis.ParseFailoverURL(withHost(hosts[0], hosts[1:]...))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		o.TLSConfig = withTLS(tlsConf, o.TLSConfig)
		sentinelCreds.apply(o, q)
		return openSingle(ctx, goredis.NewFailoverClient(o), opts)
	case cluster || len(hosts) > 1:
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, invalidURL("path %q: a Redis Cluster has no database number", u.Path)
		}
		o, err := goredis.ParseClusterURL(withHost(hosts[0], hosts[1:]...))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		o.TLSConfig = withTLS(tlsConf, o.TLSConfig)
		return openSingle(ctx, goredis.NewClusterClient(o), opts)
	default:
		o, err := goredis.ParseURL(withHost(hosts[0]))
		if err != nil {
			return nil, invalidURL("%v", err)
		}
		o.ContextTimeoutEnabled = true
		o.TLSConfig = withTLS(tlsConf, o.TLSConfig)
		return openSingle(ctx, goredis.NewClient(o), opts)
	}
}

// openSingle makes the Locker of a URL over one deployment, once c answers.
func openSingle(ctx context.Context, c goredis.UniversalClient, opts []locker.Option) (locker.Locker, error) {
	l, err := newLocker(opts, func(cfg config) (*backend, error) {
		b, err := newBackend(c, cfg)
		if err == nil {
			err = c.Ping(ctx).Err()
		}
		if err == nil {
			err = b.eviction.check(ctx, c)
		}
		return b, refused(err)
	})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return l, nil
}

// ping checks that a quorum of masters answers.
func (r *redlock) ping(ctx context.Context) (err error) {
	defer r.refusedByQuorum(&err)
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
		return fmt.Errorf("redlock: %d of %d masters failed, quorum %d: %w", len(errs), len(r.nodes), r.quorum, errors.Join(errs...))
	}
	return nil
}

// ownParams are the query parameters this package reads itself; every other
// one is go-redis's (clientParams).
var ownParams = append([]string{"prefix", "node_timeout", "accept_eviction", "allow_few_masters", "redlock", "cluster",
	"sentinel_username", "sentinel_password"}, urltls.Names...)

// sentinelAuth are the credentials of the sentinels themselves
// (sentinel_username, sentinel_password), which differ from the data
// nodes'.
type sentinelAuth struct{ user, password string }

// takeSentinelAuth takes sentinel_username and sentinel_password out of q;
// they need master_name.
func takeSentinelAuth(q url.Values, sentinel bool) (sentinelAuth, error) {
	var a sentinelAuth
	for _, k := range []string{"sentinel_username", "sentinel_password"} {
		if q.Has(k) && !sentinel {
			return a, invalidURL("query parameter %s: needs master_name (Sentinel)", k)
		}
	}
	a.user, a.password = take(q, "sentinel_username"), take(q, "sentinel_password")
	return a, nil
}

// apply sets the credentials of o, parsed by go-redis from a URL whose
// query is q. The URL's user info authenticates to the master and
// replicas, as it does to a single server, a Cluster or Redlock's
// masters (go-redis would give it to the sentinels): a password there is
// one url.URL.Redacted hides. go-redis's username and password
// parameters, if given, still win; the sentinels get a's.
func (a sentinelAuth) apply(o *goredis.FailoverOptions, q url.Values) {
	if !q.Has("username") {
		o.Username = o.SentinelUsername
	}
	if !q.Has("password") {
		o.Password = o.SentinelPassword
	}
	o.SentinelUsername, o.SentinelPassword = a.user, a.password
}

// masterAuth are the credentials of one Redlock master that differ from
// the URL's (user info, or username and password).
type masterAuth struct{ user, password *string }

// takeMasterAuth takes username_N and password_N (N from 1 to hosts, the
// master's place in the host list) out of q: Redlock's masters are
// independent servers, each with its own credentials.
func takeMasterAuth(q url.Values, hosts int) (map[int]masterAuth, error) {
	auth := map[int]masterAuth{}
	for k, vs := range q {
		field, num, ok := strings.Cut(k, "_")
		if !ok || field != "username" && field != "password" {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil || i < 1 || i > hosts || num != strconv.Itoa(i) {
			return nil, invalidURL("query parameter %s: want %s_N with N from 1 to %d, a master's place in the host list", k, field, hosts)
		}
		q.Del(k)
		v := vs[len(vs)-1]
		a := auth[i]
		if field == "username" {
			a.user = &v
		} else {
			a.password = &v
		}
		auth[i] = a
	}
	return auth, nil
}

// takeTLS takes the TLS parameters every networked backend shares
// (internal/urltls: tls, ca_file, cert_file, key_file, server_name,
// insecure_skip_verify) out of q, and returns the configuration they ask
// for, or nil.
func takeTLS(q url.Values) (*tls.Config, error) {
	var p urltls.Params
	for _, name := range urltls.Names {
		if vs, ok := q[name]; ok {
			q.Del(name)
			if _, err := p.Set(name, vs[len(vs)-1]); err != nil {
				return nil, invalidURL("%v", err)
			}
		}
	}
	c, err := p.Config()
	if err != nil {
		return nil, invalidURL("%v", err)
	}
	return c, nil
}

// withTLS is the TLS configuration of one client: c, from the URL, with
// the server name go-redis took from the host dialled unless server_name
// says otherwise; or parsed (rediss:// alone, skip_verify) when c is nil.
func withTLS(c, parsed *tls.Config) *tls.Config {
	if c == nil {
		return parsed
	}
	c = c.Clone()
	if c.ServerName == "" && parsed != nil {
		c.ServerName = parsed.ServerName
	}
	return c
}

// paramKind is the kind of value a go-redis query parameter takes.
type paramKind int

const (
	kindString paramKind = iota
	kindBool
	kindDuration // a Go duration or whole seconds; <= 0 disables the timeout
	kindCount    // an int in [0, maxCount]
	kindRetries  // an int in [-1, maxCount]: -1 means none
)

// maxCount bounds every count go-redis takes from a URL: pool and buffer
// sizes are allocated up front.
const maxCount = 1 << 20

// clientParams are the query parameters go-redis's URL parsers read
// (ParseURL, ParseClusterURL, ParseFailoverURL), with the kind of value
// each takes. go-redis panics on some values it parses (a negative
// pool_size, route_* with master_name), so each is checked here first.
var clientParams = map[string]paramKind{
	"addr": kindString, "client_name": kindString, "db": kindString, "master_name": kindString,
	"password": kindString, "username": kindString, "protocol": kindCount,
	"context_timeout_enabled": kindBool, "pool_fifo": kindBool, "read_only": kindBool, "replica_only": kindBool,
	"route_by_latency": kindBool, "route_randomly": kindBool, "skip_verify": kindBool, "use_disconnected_replicas": kindBool,
	"conn_max_idle_time": kindDuration, "conn_max_lifetime": kindDuration, "conn_max_lifetime_jitter": kindDuration,
	"dial_timeout": kindDuration, "dialer_retry_timeout": kindDuration, "idle_timeout": kindDuration, "max_conn_age": kindDuration,
	"max_retry_backoff": kindDuration, "min_retry_backoff": kindDuration, "pool_timeout": kindDuration, "read_timeout": kindDuration,
	"route_by_latency_tolerance": kindDuration, "write_timeout": kindDuration,
	"dialer_retries": kindCount, "failing_timeout_seconds": kindCount, "max_active_conns": kindCount, "max_concurrent_dials": kindCount,
	"max_idle_conns": kindCount, "min_idle_conns": kindCount, "pipeline_pool_size": kindCount,
	"pipeline_read_buffer_size": kindCount, "pipeline_write_buffer_size": kindCount, "pool_size": kindCount,
	"max_redirects": kindRetries, "max_retries": kindRetries,
}

// checkClientParams refuses, with ErrInvalidURL naming the parameter, a
// parameter given more than once (but addr, go-redis's way to list more
// hosts): this package reads the first value, go-redis the last, so a
// repeated parameter would mean one thing to the checks below and another
// to the client they guard — and route_randomly=false&route_randomly=true
// reached go-redis's panic; a go-redis parameter whose value go-redis would
// refuse or panic on; and the combinations go-redis panics on.
func checkClientParams(q url.Values) error {
	for k, vs := range q {
		if len(vs) > 1 && k != "addr" {
			return invalidURL("query parameter %s: given %d times, want it once", k, len(vs))
		}
		kind, ok := clientParams[k]
		if !ok {
			continue // ours, or unknown: go-redis names those
		}
		for _, v := range vs {
			if err := checkParam(kind, v); err != nil {
				return invalidURL("query parameter %s=%q: %v", k, v, err)
			}
		}
	}
	if q.Get("master_name") != "" {
		for _, k := range []string{"route_by_latency", "route_randomly"} {
			if on, _ := strconv.ParseBool(q.Get(k)); on {
				return invalidURL("query parameter %s: not available with master_name (Sentinel)", k)
			}
		}
	}
	return nil
}

func checkParam(kind paramKind, v string) error {
	switch kind {
	case kindBool:
		if v != "" && v != "true" && v != "false" && v != "1" && v != "0" {
			return errors.New("want true or false")
		}
	case kindDuration:
		if _, err := strconv.Atoi(v); err == nil || v == "" {
			return nil
		}
		if _, err := time.ParseDuration(v); err != nil {
			return errors.New("want a Go duration such as 2s")
		}
	case kindCount, kindRetries:
		if v == "" {
			return nil
		}
		least := 0
		if kind == kindRetries {
			least = -1
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < least || n > maxCount {
			return fmt.Errorf("want a whole number from %d to %d", least, maxCount)
		}
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
