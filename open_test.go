package locker_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
	"github.com/distlock/locker/memory"
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
			locker.Register("memory", locker.BackendOpener(func(context.Context, *url.URL) (driver.Backend, error) { return nil, nil }))
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

// A scheme of this module whose package is not imported names the import to
// add; the quick start's first error must tell a newcomer what to do.
func TestOpen_UnimportedScheme_NamesTheImport(t *testing.T) {
	for scheme, pkg := range map[string]string{
		"etcd://127.0.0.1:2379/p":    "github.com/distlock/locker/etcd",
		"redlock://a,b,c/":           "github.com/distlock/locker/redis",
		"postgresql://u@h/db":        "github.com/distlock/locker/postgres",
		"zookeeper://127.0.0.1/root": "github.com/distlock/locker/zookeeper",
	} {
		_, err := locker.Open(context.Background(), scheme)
		if !errors.Is(err, locker.ErrInvalidURL) || !strings.Contains(err.Error(), `import _ "`+pkg+`"`) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL naming import _ %q", scheme, err, pkg)
		}
	}
}

// A backend's own option is taken by that backend's constructor; left in the
// list given to New — another backend's option — it is refused, not ignored.
func TestNew_ForeignBackendOption_Refused(t *testing.T) {
	_, err := memory.New(memory.NewStore(), locker.BackendOption("redis", 1))
	if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), `"redis"`) {
		t.Fatalf("memory.New with a redis option = %v, want ErrInvalidOption naming the backend", err)
	}
}

func TestSplitOptions(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	opts := []locker.Option{locker.WithTTL(time.Minute), locker.BackendOption("redis", "a"),
		nil, locker.WithLogger(logger), locker.BackendOption("etcd", "x"), locker.BackendOption("redis", "b")}
	cfg := locker.SplitOptions("redis", opts)
	if !slices.Equal(cfg.Settings, []any{"a", "b"}) {
		t.Errorf("Settings = %v, want [a b] in order", cfg.Settings)
	}
	if cfg.Logger != logger {
		t.Error("Logger is not WithLogger's")
	}
	if len(cfg.Options) != 3 {
		t.Errorf("%d options left, want 3 (TTL, logger, the etcd option)", len(cfg.Options))
	}
	if locker.SplitOptions("redis", nil).Logger == nil {
		t.Error("Logger nil without WithLogger")
	}
}
