package reliability_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"     // registers redis://
	_ "github.com/distlock/locker/zookeeper" // registers zookeeper://
)

// Key-encoding fuzzing, one target per backend, through a live server: each
// backend encodes keys into its store's names with an unexported function
// (base64url into a Redis hash tag, escaping into an etcd range, base64url
// into a ZooKeeper path segment, bytea in PostgreSQL), so the public surface
// is the way in. For any two keys the fuzzer makes:
//
//   - an invalid key is refused with ErrInvalidKey, before any request;
//   - a held key is held for everyone (its stored name is one name): a second
//     client's TryAcquire gets ErrLocked;
//   - two distinct keys never collide, nest or escape: the second is free
//     while the first is held;
//   - nothing is left behind: after the releases, the next input finds both
//     free.

func FuzzRedisKeys(f *testing.F) {
	addr := testenv.Redis(f).Addr()
	prefix := "fuzz:" + randHex() + ":"
	fuzzKeys(f, func() (locker.Locker, error) {
		// Open's Locker owns (closes) the client it makes.
		return locker.Open(context.Background(), "redis://"+addr+"/0?prefix="+prefix, locker.WithTTL(time.Minute))
	})
}

func FuzzEtcdKeys(f *testing.F) {
	addr := testenv.Etcd(f).Addr()
	prefix := "fuzz-" + randHex() + "/"
	fuzzKeys(f, func() (locker.Locker, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		l, err := etcd.New(cli, etcd.WithPrefix(prefix), locker.WithTTL(time.Minute))
		if err != nil {
			cli.Close()
			return nil, err
		}
		return closer{l, cli.Close}, nil
	})
}

func FuzzZooKeeperKeys(f *testing.F) {
	addr := testenv.ZooKeeper(f).Addr()
	root := "/fuzz-" + randHex()
	fuzzKeys(f, func() (locker.Locker, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return locker.Open(ctx, "zookeeper://"+addr+root+"?session_timeout=10s")
	})
}

func FuzzPostgresKeys(f *testing.F) {
	dsn := testenv.PostgresDB(f)
	table := "fuzz_" + randHex()
	fuzzKeys(f, func() (locker.Locker, error) {
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		pc.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			return nil, err
		}
		l, err := postgres.New(pool, postgres.WithTable(table), locker.WithTTL(time.Minute))
		if err != nil {
			pool.Close()
			return nil, err
		}
		return closer{l, func() error { pool.Close(); return nil }}, nil
	})
}

type closer struct {
	locker.Locker
	after func() error
}

func (c closer) Close() error {
	err := c.Locker.Close()
	_ = c.after()
	return err
}

func randHex() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func fuzzKeys(f *testing.F, newLocker func() (locker.Locker, error)) {
	for _, p := range [][2]string{
		{"a", "a/b"}, {"a/b", "a"}, {"..", "."}, {"a", "a/"}, {"/a", "a"}, {`q'"%_*;--`, `q'"%_*;-`}, {"{tag}", "tag"},
		{"a}", "a"}, {"ü", "u\u0308"}, {"A", "a"}, {"a ", "a"}, {"%2F", "/"}, {"a\x00", "a"}, {"", "a"}, {"\xff", "a"},
		{strings.Repeat("k", locker.MaxKeyLen), strings.Repeat("k", locker.MaxKeyLen-1)}, {"x", strings.Repeat("k", locker.MaxKeyLen+1)},
		{"a:lock", "a"}, {"a:fence", "a"}, {"-", "_"}, {"+", "-"}, {"a=", "a"},
	} {
		f.Add(p[0], p[1])
	}
	a, err := newLocker()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	b, err := newLocker()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, k := range []string{k1, k2} {
			if locker.ValidateKey(k) != nil {
				if _, err := a.TryAcquire(ctx, k); !errors.Is(err, locker.ErrInvalidKey) {
					t.Fatalf("TryAcquire(%q) = %v, want ErrInvalidKey", k, err)
				}
				return
			}
		}
		held, err := a.TryAcquire(ctx, k1)
		if err != nil {
			t.Fatalf("TryAcquire(%q) on a free key: %v", k1, err)
		}
		defer func() {
			if err := held.Release(ctx); err != nil {
				t.Errorf("Release(%q): %v", k1, err)
			}
		}()
		if _, err := b.TryAcquire(ctx, k1); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("second client's TryAcquire(%q) while held = %v, want ErrLocked", k1, err)
		}
		if k1 == k2 {
			return
		}
		other, err := b.TryAcquire(ctx, k2)
		if err != nil {
			t.Fatalf("TryAcquire(%q) while only %q is held = %v: the keys collide", k2, k1, err)
		}
		if err := other.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", k2, err)
		}
	})
}
