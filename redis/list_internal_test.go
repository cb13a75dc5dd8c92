package redis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// List on a Cluster scans every master in turn: with locks on all three
// masters and pages of 2 (a SCAN batch may hold more locks than a page:
// the rest follow from the same SCAN cursor), every held lock under the
// prefix is listed, none outside it, no page is longer than its limit, and
// the cursors name each master. A lock may be listed twice: SCAN returns a
// key twice when the server resized its key table between two calls (seen
// here once, just after the 30 locks were taken).
func TestCluster_ListAcrossMasters(t *testing.T) {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisCluster(t).Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := newBackend(cc, config{Prefix: "test:" + t.Name() + ":", Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := locker.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	var want []string
	masters := map[string]bool{}
	for i := range 30 {
		k := fmt.Sprintf("p/%02d", i)
		if i%5 == 0 {
			k = fmt.Sprintf("q/%02d", i) // outside the prefix
		} else {
			want = append(want, k)
		}
		if _, err := l.TryAcquire(ctx, k); err != nil {
			t.Fatalf("TryAcquire(%s): %v", k, err)
		}
		m, err := cc.MasterForKey(ctx, b.names(k).lock)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("the locks are on %d masters, want 3 for the test to mean anything", len(masters))
	}

	var got []string
	named := map[string]bool{}
	cursor := ""
	for calls := 0; ; calls++ {
		if calls > 1000 {
			t.Fatal("List did not end in 1000 calls")
		}
		page, next, err := b.List(ctx, "p/", cursor, 2)
		if err != nil {
			t.Fatalf("List(cursor %q): %v", cursor, err)
		}
		if len(page) > 2 {
			t.Fatalf("List with limit 2 returned %d locks", len(page))
		}
		for _, info := range page {
			if !info.Held || info.Token == 0 {
				t.Fatalf("List returned %+v", info)
			}
			got = append(got, info.Key)
		}
		if next == "" {
			break
		}
		c, err := parseCursor(next)
		if err != nil {
			t.Fatal(err)
		}
		named[c.node] = true
		cursor = next
	}
	slices.Sort(got)
	got = slices.Compact(got)
	if !slices.Equal(got, want) {
		t.Fatalf("List(p/) over the Cluster = %q,\nwant %q", got, want)
	}
	for m := range masters {
		if !named[m] {
			t.Errorf("no cursor named master %s (named %v)", m, named)
		}
	}
}
