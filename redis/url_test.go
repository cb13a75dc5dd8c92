package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	_ "github.com/distlock/locker/redis"
)

func TestOpen_SchemesReachTheServer(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefix := testPrefix()
	for _, u := range []string{
		"redis://" + addr + "/0?prefix=" + prefix + "&dial_timeout=2s",
		"redlock://" + addr + "?allow_few_masters=true&prefix=" + prefix,
		"redis://" + addr + "/?redlock=true&allow_few_masters=true&node_timeout=200ms&prefix=" + prefix,
	} {
		l, err := locker.Open(ctx, u, locker.WithTTL(time.Second))
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		lease, err := l.TryAcquire(ctx, "url")
		if err != nil {
			t.Fatalf("Open(%q): TryAcquire: %v", u, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("Open(%q): Release: %v", u, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Open(%q): Close: %v", u, err)
		}
	}
}

func TestOpen_MalformedURL_NamesThePart(t *testing.T) {
	ctx := context.Background()
	for u, part := range map[string]string{
		"redis://127.0.0.1:6379/x":                                    "database",
		"redis://127.0.0.1:6379/0?redlock=maybe":                      "redlock",
		"redis://127.0.0.1:6379/0?node_timeout=fast":                  "node_timeout",
		"redis://127.0.0.1:6379/0?prefix=a{b":                         "prefix",
		"redis://127.0.0.1:6379/0?no_such_option=1":                   "no_such_option",
		"redis://a:1,,b:2/":                                           "empty address",
		"redis://a:1,b:2/3":                                           "database number",
		"redis://a:1,b:2/?redlock=true&master_name=m":                 "redlock",
		"redlock://127.0.0.1:1,127.0.0.1:2/0?cluster=1":               "redlock",
		"redis://127.0.0.1:1,127.0.0.1:2/?master_name=m&cluster=true": "cluster",
		"redis://127.0.0.1:1/0?prefix=locker:guard:":                  "prefix",
		// A parameter given twice: go-redis reads the last value, a check
		// of the first let route_randomly=true reach go-redis's panic.
		"redis://127.0.0.1:1,127.0.0.1:2/?master_name=m&route_randomly=false&route_randomly=true": "route_randomly",
		"redis://127.0.0.1:6379/0?prefix=a&prefix=b":                                              "prefix",
	} {
		_, err := locker.Open(ctx, u)
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", u, err)
			continue
		}
		if !strings.Contains(err.Error(), part) {
			t.Errorf("Open(%q) = %v, want it to name %q", u, err, part)
		}
	}
}

func TestOpen_Unreachable_ErrUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, u := range []string{
		"redis://" + closedAddr(t) + "/0",
		"redlock://" + closedAddr(t) + "," + closedAddr(t) + "," + closedAddr(t),
	} {
		if _, err := locker.Open(ctx, u); !errors.Is(err, locker.ErrUnavailable) {
			t.Errorf("Open(%q) = %v, want ErrUnavailable", u, err)
		}
	}
}
