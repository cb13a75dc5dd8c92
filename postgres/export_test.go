package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultBudget is the default connection budget of a Locker on the server
// of dsn, for the conformance harness (MaxHeld).
func DefaultBudget(ctx context.Context, dsn string) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	avail, err := availableConns(ctx, conn)
	if err != nil {
		return 0, err
	}
	return defaultBudget(avail), nil
}

// AdvisoryKey is the advisory lock number of key in the advisory mode on
// table in schema.
func AdvisoryKey(schema, table, key string) int64 {
	n, err := newNames(schema, table)
	if err != nil {
		panic(err)
	}
	return (&advBackend{b: &backend{n: n}}).advisoryKey(key)
}

// Wakeups reports how many looks for a free permit this process has made.
func Wakeups() int64 { return wakeups.Load() }

// SetSpareIdle sets how long an advisory Locker keeps a spare session
// unused, until the test ends.
func SetSpareIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := spareIdle
	spareIdle = d
	t.Cleanup(func() { spareIdle = old })
}

// The advisory mode's statements, for BenchmarkAdvisoryBreakdown.
const (
	TryOnSQL   = tryOnSQL
	ReleaseSQL = releaseSQL
)

// SharedConns is how many shared sessions an advisory Locker keeps per TTL
// at most.
const SharedConns = sharedConns
