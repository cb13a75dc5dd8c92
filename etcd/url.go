package etcd

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/urltls"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func init() { locker.Register(Scheme, open) }

// DefaultPort is the client port assumed for a host given without one.
const DefaultPort = "2379"

// DefaultDialTimeout bounds connecting to the cluster when a URL does not
// set dial_timeout.
const DefaultDialTimeout = 5 * time.Second

// urlConfig is everything a URL says: how to make the client, and the
// backend options (WithPrefix from the path, WithRequestTimeout).
type urlConfig struct {
	client clientv3.Config
	opts   []locker.Option
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: etcd: "+format, append([]any{locker.ErrInvalidURL}, args...)...)
}

// parseURL reads etcd://[user[:password]@]host[:port][,host[:port]…][/prefix][?params].
// Parameters: tls (true/false), ca_file, cert_file, key_file, server_name,
// insecure_skip_verify, dial_timeout, request_timeout.
func parseURL(u *url.URL) (*urlConfig, error) {
	c := &urlConfig{}
	c.client.DialTimeout = DefaultDialTimeout
	if u.Opaque != "" {
		return nil, invalid("want etcd://host:port[,host:port…]/prefix, got an opaque URL")
	}
	if u.Host == "" {
		return nil, invalid("missing host: want etcd://host:port[,host:port…]")
	}
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			return nil, invalid("empty host in %q", u.Host)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: the default one.
			host, port = h, DefaultPort
			if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
				return nil, invalid("host %q: %v", h, err)
			}
			host = strings.Trim(host, "[]")
		}
		if host == "" {
			return nil, invalid("host %q has no name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, invalid("host %q: port %q is not a number from 1 to 65535", h, port)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	if u.User != nil {
		c.client.Username = u.User.Username()
		c.client.Password, _ = u.User.Password()
		if c.client.Username == "" {
			return nil, invalid("user info has a password but no user name")
		}
	}
	if prefix := strings.TrimPrefix(u.Path, "/"); prefix != "" {
		if strings.IndexByte(prefix, 0) >= 0 {
			return nil, invalid("path (the key prefix) %q contains NUL", prefix)
		}
		c.opts = append(c.opts, WithPrefix(prefix))
	}

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalid("query: %v", err)
	}
	var tp urltls.Params
	for name, vs := range q {
		v := vs[len(vs)-1]
		if known, err := tp.Set(name, v); known {
			if err != nil {
				return nil, invalid("%v", err)
			}
			continue
		}
		switch name {
		case "dial_timeout", "request_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, invalid("query parameter %s=%q: want a positive Go duration such as 5s", name, v)
			}
			if name == "dial_timeout" {
				c.client.DialTimeout = d
			} else {
				c.opts = append(c.opts, WithRequestTimeout(d))
			}
		default:
			return nil, invalid("unknown query parameter %q (known: tls, ca_file, cert_file, key_file, server_name, insecure_skip_verify, dial_timeout, request_timeout, and locker's ttl, namespace, owner)", name)
		}
	}
	tlsConf, err := tp.Config()
	if err != nil {
		return nil, invalid("%v", err)
	}
	c.client.TLS = tlsConf
	scheme := "http://"
	if tlsConf != nil {
		scheme = "https://"
	}
	for _, h := range hosts {
		c.client.Endpoints = append(c.client.Endpoints, scheme+h)
	}
	return c, nil
}

// open is the Opener registered for the etcd scheme. It makes a client the
// Locker owns, logging through WithLogger's logger, and checks with one
// serializable read of the prefix that the cluster answers (and that the
// credentials may read it), so that a bad address fails at Open rather
// than at the first acquisition.
func open(ctx context.Context, u *url.URL, opts []locker.Option) (_ locker.Locker, err error) {
	defer markRefusals(&err)
	uc, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	// The URL's options first: the caller's, after them, win.
	opts = append(uc.opts, opts...)
	c, err := splitOptions(opts)
	if err != nil {
		return nil, err
	}
	// The client logs through zap, at info level unless told otherwise;
	// here it logs to WithLogger's handler, which discards by default.
	uc.client.Logger = zap.New(newSlogCore(c.logger.Handler()))
	cli, err := clientv3.New(uc.client)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", strings.Join(uc.client.Endpoints, ","), err)
	}
	pctx, cancel := context.WithTimeout(ctx, uc.client.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable()); err != nil {
		_ = cli.Close()
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// gRPC retries a refused handshake until the deadline and
			// reports only the deadline: ask TLS itself why.
			err = cmp.Or(tlsRefusal(ctx, uc.client.Endpoints[0], uc.client.TLS),
				fmt.Errorf("no answer from %s within dial_timeout %v", strings.Join(uc.client.Endpoints, ","), uc.client.DialTimeout))
		}
		return nil, err
	}
	return newLocker(cli, true, c) // closes cli on failure
}

// tlsRefusal returns why a TLS handshake with endpoint (https://host:port)
// fails, or nil when it succeeds or conf is nil. A server that refuses the
// client's certificate says so in an alert after the client's side of the
// handshake is done, so one read follows it.
func tlsRefusal(ctx context.Context, endpoint string, conf *tls.Config) error {
	if conf == nil {
		return nil
	}
	host := strings.TrimPrefix(endpoint, "https://")
	conf = conf.Clone()
	conf.NextProtos = []string{"h2"}
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(host)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := (&tls.Dialer{Config: conf}).DialContext(dctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("TLS with %s: %w", host, err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	switch msg := fmt.Sprint(err); {
	case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case strings.Contains(msg, "remote error: tls: ") && strings.Contains(msg, "certificate"):
		// The server's alert (certificate required, bad or unknown
		// certificate…): it refused the client's certificate, a credential.
		// crypto/tls exports no type for a received alert.
		return fmt.Errorf("%w: TLS with %s: %w", locker.ErrUnauthorized, host, err)
	}
	return fmt.Errorf("TLS with %s: %w", host, err)
}
