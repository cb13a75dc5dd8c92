package redis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// TestUncontended_Commands: an uncontended acquire+release is two EVALSHAs
// that run at most eight commands on the server between them (SET NX,
// TIME, SET … GET of the fence and SPUBLISH; GET, DEL, SPUBLISH and a look
// at the queue): what a lock costs the server is mostly what its scripts
// call. Counted by INFO commandstats on a server of its own.
func TestUncontended_Commands(t *testing.T) {
	const pairs = 20
	addr := testenv.RedisMasters(t, 1).Addrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newSingle(t, addr)
	key := "commands/" + testPrefix()
	pair := func() {
		t.Helper()
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair() // the scripts cached, the connection made
	admin := direct(t, addr)
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range pairs {
		pair()
	}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	total := 0
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
		name = strings.TrimPrefix(name, "cmdstat_")
		if strings.HasPrefix(name, "config") || name == "info" || name == "hello" || strings.HasPrefix(name, "client") {
			continue // the test's own, or a new connection's handshake
		}
		calls[name] = n
		if name != "evalsha" {
			total += n
		}
	}
	if calls["evalsha"] != 2*pairs {
		t.Errorf("%d EVALSHAs for %d acquire+release pairs, want %d: %v", calls["evalsha"], pairs, 2*pairs, calls)
	}
	if total > 8*pairs {
		t.Errorf("%d commands inside the scripts for %d pairs (%.1f a pair), want at most 8 a pair: %v",
			total, pairs, float64(total)/pairs, calls)
	}
}
