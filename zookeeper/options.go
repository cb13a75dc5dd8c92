package zookeeper

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
)

// config is what a Locker's options set.
type config struct {
	root           string
	sessionTimeout time.Duration
	acl            []zk.ACL
	events         <-chan zk.Event
	connectTimeout time.Duration
	user, password string // digest authentication (WithDigest), or ""
	tls            *tls.Config
	dialer         zk.Dialer
	log            *slog.Logger
}

// setting is this package's backend setting (locker.BackendOption).
type setting func(*config) error

func option(f func(*config) error) locker.Option { return locker.BackendOption(Scheme, setting(f)) }

// WithRoot sets the absolute path of the node under which lock directories
// are created (default DefaultRoot); missing nodes on the way are created as
// persistent nodes. The URL's path sets it.
func WithRoot(root string) locker.Option {
	return option(func(c *config) error {
		if err := validateRoot(root); err != nil {
			return fmt.Errorf("root %q: %v", root, err)
		}
		c.root = root
		return nil
	})
}

// WithSessionTimeout is, for New (where it is required), the session timeout
// the server negotiated for the connection; for a URL (session_timeout), the
// one to request (default DefaultSessionTimeout; the server bounds it). It is
// every lease's TTL: a shorter TTL is rounded up to it, a longer one refused.
func WithSessionTimeout(d time.Duration) locker.Option {
	return duration("session timeout", d, func(c *config) { c.sessionTimeout = d })
}

// duration is an option setting a positive duration with set.
func duration(what string, d time.Duration, set func(*config)) locker.Option {
	return option(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%s %v is not positive", what, d)
		}
		set(c)
		return nil
	})
}

// WithACL is the ACL of every node created (default: all rights to the
// WithDigest identity alone, or, without one, to anyone).
func WithACL(acl []zk.ACL) locker.Option {
	return option(func(c *config) error {
		if len(acl) == 0 {
			return fmt.Errorf("empty ACL")
		}
		c.acl = acl
		return nil
	})
}

// WithEvents hands New the event channel zk.Connect returned with its
// connection; the Locker then reads it (the caller must not), sees
// disconnections, and reports every lease of a session that stayed
// disconnected too long as lost before its deadline. For New only.
func WithEvents(events <-chan zk.Event) locker.Option {
	return option(func(c *config) error {
		if events == nil {
			return fmt.Errorf("nil event channel")
		}
		c.events = events
		return nil
	})
}

// WithConnectTimeout bounds how long Open waits for the first session
// (default DefaultConnectTimeout, never past Open's context). For URLs only
// (connect_timeout).
func WithConnectTimeout(d time.Duration) locker.Option {
	return duration("connect timeout", d, func(c *config) { c.connectTimeout = d })
}

// WithDigest authenticates the Locker's own connection (Open only) with
// ZooKeeper's digest scheme as user, on every session before any other
// request, and makes every node the Locker creates readable and writable
// by that identity alone (unless WithACL says otherwise). The URL's
// user:password sets it. For New, authenticate conn yourself
// (conn.AddAuth("digest", …)) and give WithACL(zk.AuthACL(zk.PermAll)).
func WithDigest(user, password string) locker.Option {
	return option(func(c *config) error {
		if user == "" || strings.Contains(user, ":") {
			return fmt.Errorf("digest user name %q: want a non-empty name without ':'", user)
		}
		c.user, c.password = user, password
		return nil
	})
}

// WithTLS makes the Locker's own connection (Open only) speak TLS with
// conf: the server's secure client port (secureClientPort). An empty
// conf.ServerName is the host dialled. The URL's tls, ca_file, cert_file,
// key_file, server_name and insecure_skip_verify parameters set it.
func WithTLS(conf *tls.Config) locker.Option {
	return option(func(c *config) error {
		if conf == nil {
			return fmt.Errorf("nil TLS configuration")
		}
		c.tls = conf
		return nil
	})
}

// WithDialer sets how the Locker's own connection (Open only) reaches each
// server (default net.DialTimeout); WithTLS runs over it.
func WithDialer(d zk.Dialer) locker.Option {
	return option(func(c *config) error {
		if d == nil {
			return fmt.Errorf("nil dialer")
		}
		c.dialer = d
		return nil
	})
}

// newConfig applies a Locker's settings; an error wraps
// locker.ErrInvalidOption.
func newConfig(bc locker.BackendConfig) (*config, error) {
	c := &config{root: DefaultRoot, log: bc.Logger}
	for _, s := range bc.Settings {
		f, ok := s.(setting)
		if !ok {
			return nil, fmt.Errorf("%w: %T is not a zookeeper setting", locker.ErrInvalidOption, s)
		}
		if err := f(c); err != nil {
			return nil, fmt.Errorf("%w: %v", locker.ErrInvalidOption, err)
		}
	}
	if c.acl == nil {
		c.acl = zk.WorldACL(zk.PermAll)
		if c.user != "" {
			c.acl = zk.DigestACL(zk.PermAll, c.user, c.password)
		}
	}
	return c, nil
}
