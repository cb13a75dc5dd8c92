package redis

import (
	"context"
	"errors"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/distlock/locker"
)

// urlEdgeValues are the values FuzzOpenQuery gives each parameter: the
// edges of every kind of value a parameter takes (bool, int, duration,
// string).
var urlEdgeValues = []string{"", "0", "1", "-1", "-2", "2", "3", "true", "false", "maybe",
	"2147483648", "-9223372036854775808", "99999999999", "1ns", "0s", "-1s", "1h", "9999999h", "x", "{", "m"}

// urlParamNames are the names FuzzOpenQuery draws from: every parameter
// this package reads, and every one go-redis's URL parsers read.
func urlParamNames() []string {
	names := make([]string, 0, len(ownParams)+len(clientParams))
	for _, p := range ownParams {
		names = append(names, p)
	}
	for n := range clientParams {
		names = append(names, n)
	}
	sort.Strings(names) // the fuzzer's bytes pick names by index: keep it stable
	return names
}

// FuzzOpenQuery opens URLs whose query is made of the real parameter names
// with edge values, on each scheme and host shape (one host, several,
// Sentinel): Open never panics and fails only with ErrInvalidURL or, as
// nothing listens, ErrUnavailable or the context's error.
func FuzzOpenQuery(f *testing.F) {
	for _, s := range []string{"\x00\x05", "\x01\x10\x02", "\x02\x07\x03\x08\x04"} {
		f.Add(uint8(0), []byte(s))
	}
	f.Add(uint8(2), []byte{byte(indexOf(urlParamNames(), "master_name")), 20, byte(indexOf(urlParamNames(), "route_randomly")), 7})
	f.Add(uint8(0), []byte{byte(indexOf(urlParamNames(), "pool_size")), 3})
	names := urlParamNames()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, shape uint8, params []byte) {
		base := []string{"redis://127.0.0.1:1/0", "redis://127.0.0.1:1,127.0.0.1:2/", "redis://127.0.0.1:1,127.0.0.1:2/?master_name=m",
			"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "rediss://127.0.0.1:1/0", "redis://127.0.0.1:1/?cluster=true"}[int(shape)%6]
		u, _ := url.Parse(base)
		q := u.Query()
		for i := 0; i+1 < len(params); i += 2 {
			n := names[int(params[i])%len(names)]
			if strings.Contains(n, "addr") {
				continue // would reach other hosts
			}
			q.Add(n, urlEdgeValues[int(params[i+1])%len(urlEdgeValues)])
		}
		u.RawQuery = q.Encode()
		l, err := locker.Open(ctx, u.String())
		if l != nil {
			_ = l.Close()
			return
		}
		if !errors.Is(err, locker.ErrInvalidURL) && !errors.Is(err, locker.ErrUnavailable) && !errors.Is(err, context.Canceled) {
			t.Fatalf("Open(%q) = %v, want ErrInvalidURL, ErrUnavailable or context.Canceled", u, err)
		}
	})
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return 0
}
