package locker_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	_ "github.com/distlock/locker/memory"
)

func TestOpen_MalformedURL_NamesTheWrongPart(t *testing.T) {
	ctx := context.Background()
	cases := map[string]string{ // URL → a word the message must contain
		"":                                   "missing scheme",
		"localhost:6379":                     "unknown scheme",
		"nosuch://host":                      "forgotten import",
		"memory://x?ttl=soon":                "ttl",
		"memory://x?ttl=-5s":                 "ttl",
		"memory://x?namespace=a%00b":         "namespace",
		"memory://x/some/path":               "path",
		"memory://x:8080":                    "port",
		"memory://x?%zz":                     "query",
		"memory://%zz":                       "invalid URL",
		"nosuch://user:hunter2@host/?ttl=1s": "nosuch",
	}
	for url, word := range cases {
		l, err := locker.Open(ctx, url)
		if !errors.Is(err, locker.ErrInvalidURL) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", url, err)
			continue
		}
		if !strings.Contains(err.Error(), word) {
			t.Errorf("Open(%q) = %q, want the message to name %q", url, err, word)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) leaks the password: %q", url, err)
		}
	}
}

func TestOpen_UnknownScheme_ListsRegistered(t *testing.T) {
	_, err := locker.Open(context.Background(), "nosuch://host")
	if !strings.Contains(err.Error(), "memory") {
		t.Fatalf("error %q does not list the registered scheme memory", err)
	}
}

func TestOpen_QueryOptionsApply(t *testing.T) {
	ctx := context.Background()
	a, err := locker.Open(ctx, "memory://open-query?namespace=ns1&owner=me&ttl=90s")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := locker.Open(ctx, "memory://open-query")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lease, err := a.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if d := lease.Deadline(); time.Until(d) < time.Minute {
		t.Fatalf("deadline %v: the ttl=90s parameter was not applied", d)
	}
	// Same store, no namespace: the namespaced key is a different lock.
	other, err := b.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire outside the namespace = %v, want the lock", err)
	}
	other.Release(ctx)
}

func TestRegister_TwiceOrNil_Panics(t *testing.T) {
	for name, fn := range map[string]func(){
		"duplicate": func() {
			locker.Register("memory", func(context.Context, *url.URL) (driver.Backend, error) { return nil, nil })
		},
		"nil": func() { locker.Register("nil-opener", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", name)
				}
			}()
			fn()
		}()
	}
}
