package zookeeper

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

func init() { locker.Register(Scheme, locker.BackendOpener(open)) }

// open is the Opener of the "zookeeper" scheme; see the package doc, "URLs".
func open(ctx context.Context, u *url.URL) (driver.Backend, error) {
	cfg, servers, connectTimeout, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return dial(ctx, servers, cfg)
}

func parseURL(u *url.URL) (cfg Config, servers []string, connectTimeout time.Duration, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: zookeeper: "+format, append([]any{locker.ErrInvalidURL}, args...)...)
	}
	if u.Opaque != "" {
		return cfg, nil, 0, bad("want zookeeper://host:port[,host:port…]/root")
	}
	if u.Host == "" {
		return cfg, nil, 0, bad("no host: want zookeeper://host:port[,host:port…]/root")
	}
	for _, h := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: ZooKeeper's own.
			host, port = h, "2181"
		}
		if host == "" {
			return cfg, nil, 0, bad("host %q: empty host name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return cfg, nil, 0, bad("host %q: port %q is not a number from 1 to 65535", h, port)
		}
		servers = append(servers, net.JoinHostPort(host, port))
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok {
			return cfg, nil, 0, bad("user info: want user:password for digest authentication")
		}
		cfg.Digest = u.User.Username() + ":" + pass
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		if err := validateRoot(p); err != nil {
			return cfg, nil, 0, bad("path (the root node) %q: %v", u.Path, err)
		}
		cfg.Root = p
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return cfg, nil, 0, bad("query: %v", err)
	}
	connectTimeout = DefaultConnectTimeout
	for k, v := range q {
		switch k {
		case "session_timeout", "connect_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return cfg, nil, 0, bad("query parameter %s=%q: want a positive Go duration such as 15s", k, v[0])
			}
			if k == "session_timeout" {
				cfg.SessionTimeout = d
			} else {
				connectTimeout = d
			}
		default:
			return cfg, nil, 0, bad("unknown query parameter %q (known: session_timeout, connect_timeout, and locker's ttl, namespace, owner)", k)
		}
	}
	return cfg, servers, connectTimeout, nil
}
