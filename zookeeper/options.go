package zookeeper

import (
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
	digest         string // "user:password", from a URL's user info
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

// WithACL is the ACL of every node created (default: all rights to anyone,
// or to the URL's digest identity).
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

// newConfig applies a Locker's settings; an error wraps
// locker.ErrInvalidOption. digest is a URL's "user:password", or "".
func newConfig(bc locker.BackendConfig, digest string) (*config, error) {
	c := &config{root: DefaultRoot, log: bc.Logger, digest: digest}
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
		if user, pass, ok := strings.Cut(c.digest, ":"); ok {
			c.acl = zk.DigestACL(zk.PermAll, user, pass)
		}
	}
	return c, nil
}
