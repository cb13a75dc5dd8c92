package reliability_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	_ "github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/opencheck"
	_ "github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
)

// URL fuzzing, one target per backend: locker.Open of the backend's
// schemes with anything after "scheme://" never panics, returns a Locker or
// an error (never both, never neither), classifies its error as
// ErrInvalidURL, ErrInvalidOption, ErrUnavailable or the context's, and
// never repeats the URL's password. Each backend's parser is unexported and
// runs first thing in Open, so Open is the way in.
//
// The fuzzer must not make the parser talk to the world: every host it
// writes is replaced by 127.0.0.1 (its port, and the shape of the host list,
// stay the fuzzer's), query parameters that name files or further hosts
// are dropped, and Open gets a context that has already ended, so that
// nothing is dialled past the first refusal.

func FuzzRedisURL(f *testing.F) {
	fuzzURL(f, []string{"redis", "rediss", "redlock"}, []string{
		"h:6379/0", "h:6379", "u:secret99@h:6379/1?prefix=p:", "h1:1,h2:2,h3:3/0?redlock=true", "h:1?cluster=true",
		"s1:1,s2:2/0?master_name=m", "h:1/0?node_timeout=50ms", "h:1/0?node_timeout=-1s", "h:1?prefix={x}", "h:1?redlock=maybe",
		"h1:1,,h2:2", "h:1/x", "h:1/0?dial_timeout=1s&pool_size=3", "[::1]:1/0", "h:99999/0", ":1", "h:1?ttl=1s&namespace=n",
		"s1:1,s2:2/0?master_name=m&route_randomly=true", "h:1/0?pool_size=-1", "h1:1,h2:2?pool_size=-1", "h:1?accept_eviction=maybe",
	})
}

func FuzzEtcdURL(f *testing.F) {
	fuzzURL(f, []string{"etcd"}, []string{
		"h:2379/prefix", "h", "h1:1,h2:2/p?dial_timeout=1s&request_timeout=1s", "u:secret99@h:2379/", "h:1?tls=true&server_name=x",
		"h:1?insecure_skip_verify=true", "h:1?tls=maybe", "h:1?unknown=1", "h:0", "h:70000", "h1,,h2", "[::1]:1", "[::1]", "h:1?dial_timeout=0s",
		":secret99@h:1", "h:1/a%2Fb",
	})
}

func FuzzZooKeeperURL(f *testing.F) {
	fuzzURL(f, []string{"zookeeper"}, []string{
		"h:2181/root", "h1:1,h2:2/a/b?session_timeout=2s&connect_timeout=1s", "u:secret99@h:1/r", "h", "h:1?session_timeout=x",
		"h:1/..", "h:1//", "h:1/r/", "h:1?unknown=1", "h:x", "h1,,h2/r", "[::1]:1/r", "h:1/r?session_timeout=-1s",
	})
}

func FuzzPostgresURL(f *testing.F) {
	fuzzURL(f, []string{"postgres", "postgresql"}, []string{
		"u@h/db", "u:secret99@h:5432/db?sslmode=disable&table=t&schema=s", "h/db?table=", "h/db?table=a&table=b",
		"h/db?table=" + strings.Repeat("t", 70), "h/db?pool_max_conns=x", "h/db?pool_max_conns=0", "h/db?sslmode=bogus",
		"h1:1,h2:2/db", "h/db?connect_timeout=1", "h/db?table=a%00b", "[::1]:1/db", "h/db?target_session_attrs=any",
	})
}

func fuzzURL(f *testing.F, schemes []string, seeds []string) {
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, scheme uint8, rest string) {
		raw := local(schemes[int(scheme)%len(schemes)] + "://" + rest)
		l, err := locker.Open(ctx, raw)
		opencheck.Outcome(t, raw, l, err, locker.ErrInvalidURL, locker.ErrInvalidOption, locker.ErrUnavailable, context.Canceled)
		if l != nil {
			_ = l.Close()
		}
	})
}

// local rewrites raw so that opening it reaches nothing but 127.0.0.1 and
// reads no file: see above. A raw URL that does not parse is returned as
// it is (Open fails on it before any backend code runs).
func local(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.Host != "" {
		hosts := strings.Split(u.Host, ",")
		for i, h := range hosts {
			if h == "" {
				continue
			}
			port := ""
			if j := strings.LastIndexByte(h, ':'); j >= 0 && !strings.HasSuffix(h, "]") {
				port = h[j:]
			}
			hosts[i] = "127.0.0.1" + port
		}
		u.Host = strings.Join(hosts, ",")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		for k := range q {
			lk := strings.ToLower(k)
			for _, bad := range []string{"file", "cert", "key", "service", "host", "addr"} {
				if strings.Contains(lk, bad) {
					q.Del(k)
				}
			}
			// etcd's client blocks for dial_timeout (default 5 s) in New,
			// whatever the context: keep it short, but let the parser see
			// the values it must refuse.
			if strings.HasPrefix(lk, "dial_timeout") {
				if d, err := time.ParseDuration(q.Get(k)); err == nil && d > 10*time.Millisecond {
					q.Set(k, "10ms")
				}
			}
		}
		if strings.HasPrefix(raw, "etcd:") && !q.Has("dial_timeout") {
			q.Set("dial_timeout", "10ms")
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
