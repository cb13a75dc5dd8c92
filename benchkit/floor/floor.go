// Package floor gives the raw floor of each lock service for package
// benchkit: the bare round trips one acquire+release needs, made with the
// service's own Go client, so that a lock's cost reads as a ratio to what
// its protocol cannot avoid. Like benchkit it is not part of locker's API
// and may change without notice.
//
// The floors, per group:
//
//	redis      2 × PING                      (acquire and release are one EVALSHA each)
//	redlock    2 × PING to every master in parallel, waiting for all
//	etcd       txn put (leased, guarded on CreateRevision = 0) + delete:
//	           the two Raft writes an acquire and a release must make; a
//	           linearizable Range is a read and never waits for the WAL
//	zookeeper  create ephemeral-sequential + getChildren + delete: a queue
//	           lock must write its node, read the queue and delete the node
//	postgres   2 × SELECT 1 on one pinned connection (acquire is one
//	           pipelined batch, release one ROLLBACK)
//
// The "lock" of a floor subject is the first half of those round trips and
// its "release" the rest; it excludes nobody, so benchkit runs floors only
// in the uncontended and many-keys workloads.
package floor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/distlock/locker/benchkit"
)

// ForURL returns the floor subject for a locker URL, in group group, or nil
// (and no error) when the URL's backend has no floor here (memory://, a Redis
// Cluster or Sentinel, TLS deployments).
func ForURL(ctx context.Context, rawURL, group string) (*benchkit.Subject, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	for _, k := range []string{"ttl", "namespace", "owner"} {
		q.Del(k)
	}
	var s *benchkit.Subject
	switch strings.ToLower(u.Scheme) {
	case "redis", "redlock":
		hosts := strings.Split(u.Host, ",")
		redlock := u.Scheme == "redlock" || q.Get("redlock") == "true" || q.Get("redlock") == "1"
		if q.Get("cluster") != "" || q.Get("master_name") != "" || (len(hosts) > 1 && !redlock) {
			return nil, nil
		}
		for _, k := range []string{"prefix", "node_timeout", "redlock", "cluster"} {
			q.Del(k)
		}
		base := *u
		base.Scheme, base.RawQuery = "redis", q.Encode()
		var urls []string
		for _, h := range hosts {
			v := base
			v.Host = h
			urls = append(urls, v.String())
		}
		if redlock {
			s, err = Redlock(ctx, urls)
		} else {
			s, err = Redis(ctx, urls[0])
		}
	case "etcd":
		// The floor's client speaks neither TLS nor etcd's authentication:
		// no floor then, as for an authenticated ZooKeeper.
		if q.Get("tls") != "" || q.Get("ca_file") != "" || q.Get("cert_file") != "" || u.User != nil {
			return nil, nil
		}
		s, err = Etcd(ctx, withPorts(u.Host, "2379"))
	case "zookeeper":
		if u.User != nil {
			return nil, nil
		}
		s, err = ZooKeeper(ctx, withPorts(u.Host, "2181"))
	case "postgres", "postgresql":
		for _, p := range []string{"table", "schema", "max_conns", "skip_schema_creation"} {
			q.Del(p) // the Locker's own parameters
		}
		v := *u
		v.RawQuery = q.Encode()
		s, err = Postgres(ctx, v.String())
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("floor for %s: %w", u.Redacted(), err)
	}
	s.Group = group
	return s, nil
}

// withPorts splits a comma-separated host list, adding port where missing.
func withPorts(hosts, port string) []string {
	var out []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			continue
		}
		if !strings.Contains(strings.TrimPrefix(h, "["), ":") || strings.HasSuffix(h, "]") {
			h += ":" + port
		}
		out = append(out, h)
	}
	return out
}

// closers closes several things, joining their errors.
type closers []func() error

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
