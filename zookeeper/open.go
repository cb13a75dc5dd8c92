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
	"github.com/distlock/locker/internal/urltls"
)

func init() { locker.Register(Scheme, open) }

// open is the Opener of the "zookeeper" scheme; see the package doc. The
// URL's settings go before the caller's options, which override them.
func open(ctx context.Context, u *url.URL, opts []locker.Option) (locker.Locker, error) {
	p, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	bc := locker.SplitOptions(Scheme, append(p.opts, opts...))
	cfg, err := newConfig(bc)
	if err != nil {
		return nil, err
	}
	b, err := dial(ctx, p.servers, cfg)
	if err != nil {
		return nil, err
	}
	return b.locker(bc.Options)
}

// parsedURL is what a zookeeper:// URL says.
type parsedURL struct {
	servers []string
	opts    []locker.Option // WithRoot, WithSessionTimeout, WithConnectTimeout, WithDigest, WithTLS
}

func parseURL(u *url.URL) (parsedURL, error) {
	var p parsedURL
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: zookeeper: "+format, append([]any{locker.ErrInvalidURL}, args...)...)
	}
	if u.Opaque != "" {
		return p, bad("want zookeeper://host:port[,host:port…]/root")
	}
	if u.Host == "" {
		return p, bad("no host: want zookeeper://host:port[,host:port…]/root")
	}
	for _, h := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: ZooKeeper's own. An IPv6 literal keeps its
			// brackets in the URL, not in the host JoinHostPort takes.
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "2181"
		}
		if host == "" {
			return p, bad("host %q: empty host name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return p, bad("host %q: port %q is not a number from 1 to 65535", h, port)
		}
		p.servers = append(p.servers, net.JoinHostPort(host, port))
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok {
			return p, bad("user info: want user:password for digest authentication")
		}
		if strings.Contains(u.User.Username(), ":") {
			return p, bad("user info: the user name must not contain ':'")
		}
		p.opts = append(p.opts, WithDigest(u.User.Username(), pass))
	}
	if root := strings.TrimSuffix(u.Path, "/"); root != "" {
		if err := validateRoot(root); err != nil {
			return p, bad("path (the root node) %q: %v", u.Path, err)
		}
		p.opts = append(p.opts, WithRoot(root))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return p, bad("query: %v", err)
	}
	var tp urltls.Params
	for k, v := range q {
		if known, err := tp.Set(k, v[len(v)-1]); known {
			if err != nil {
				return p, bad("%v", err)
			}
			continue
		}
		switch k {
		case "session_timeout", "connect_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return p, bad("query parameter %s=%q: want a positive Go duration such as 15s", k, v[0])
			}
			if k == "session_timeout" {
				p.opts = append(p.opts, WithSessionTimeout(d))
			} else {
				p.opts = append(p.opts, WithConnectTimeout(d))
			}
		default:
			return p, bad("unknown query parameter %q (known: session_timeout, connect_timeout, %s, and locker's ttl, namespace, owner)", k, strings.Join(urltls.Names, ", "))
		}
	}
	conf, err := tp.Config()
	if err != nil {
		return p, bad("%v", err)
	}
	if conf != nil {
		p.opts = append(p.opts, WithTLS(conf))
	}
	return p, nil
}
