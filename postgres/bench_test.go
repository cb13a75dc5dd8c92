package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// The benchmarks run each workload three ways in the same process against
// the same server, so that figures compare as ratios:
//
//	locker    this package: one pipelined batch to acquire, ROLLBACK to release
//	raw       the floor by hand with bare pgx: BEGIN; SELECT … FOR UPDATE; COMMIT
//	raw-rb    the same, ending in ROLLBACK (no WAL flush at the end)
//	advisory  pg_advisory_lock($1); pg_advisory_unlock($1)
//
// and report the round trip (SELECT 1) beside them.

// benchEnv is one database with a lock table, a Locker and a plain pool.
type benchEnv struct {
	l    locker.Locker
	adv  locker.Locker // the advisory mode
	pool *pgxpool.Pool
}

func newBenchEnv(b *testing.B, conns int32) *benchEnv {
	b.Helper()
	dsn := testenv.PostgresDB(b)
	pc := mustPoolConfig(b, dsn)
	pc.MaxConns = conns
	lpool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(lpool.Close)
	l, err := postgres.New(lpool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	pc = mustPoolConfig(b, dsn)
	pc.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	pc = mustPoolConfig(b, dsn)
	pc.MaxConns = conns
	apool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(apool.Close)
	adv, err := postgres.New(apool, postgres.WithMode(postgres.Advisory))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = adv.Close() })
	return &benchEnv{l: l, adv: adv, pool: pool}
}

// warm creates the rows of keys (the locker does on first use) and opens n
// connections of each pool, outside the timer.
func (e *benchEnv) warm(b *testing.B, keys []string, n int) {
	b.Helper()
	ctx := context.Background()
	for _, l := range []locker.Locker{e.l, e.adv} {
		for _, k := range keys {
			lease, err := l.Acquire(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	var leases []locker.Lease
	var conns []*pgxpool.Conn
	for i := range n {
		lease, err := e.l.Acquire(ctx, fmt.Sprintf("warm-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		leases = append(leases, lease)
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i := range leases {
		_ = leases[i].Release(ctx)
		conns[i].Release()
	}
}

type lockFunc func(ctx context.Context, key string) (unlock func() error, err error)

// variant is one way of locking a key, named for the benchmark's report.
type variant struct {
	name string
	f    lockFunc
}

func (e *benchEnv) locker() lockFunc { return lockerFunc(e.l) }

func lockerFunc(l locker.Locker) lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		lease, err := l.Acquire(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Release(ctx) }, nil
	}
}

func (e *benchEnv) raw(end string) lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			c.Release()
			return nil, err
		}
		if _, err := c.Exec(ctx, "SELECT 1 FROM locker_locks WHERE key = $1 FOR UPDATE", []byte(key)); err != nil {
			c.Release()
			return nil, err
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, end)
			return err
		}, nil
	}
}

func (e *benchEnv) advisory() lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
			c.Release()
			return nil, err
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
			return err
		}, nil
	}
}

// advisoryToken is advisory() with what the advisory mode adds on the
// server: the token drawn in the lock's statement, the idle timeout set,
// and the server's identity read (the statements of postgres/advisory.go).
func (e *benchEnv) advisoryToken() lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		var n *int64
		if err := c.QueryRow(ctx, "SELECT n, (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint, "+
			"coalesce((extract(epoch FROM pg_last_xact_replay_timestamp()) * 1000000)::bigint, 0), "+
			"set_config('idle_session_timeout', CASE WHEN n IS NULL THEN $3 ELSE $2 END, false) "+
			"FROM (SELECT CASE WHEN pg_try_advisory_lock(hashtextextended($1, 0)) THEN nextval('locker_locks_token') END AS n) AS t",
			key, "60000", "0").Scan(&n, nil, nil, nil); err != nil || n == nil {
			c.Release()
			return nil, fmt.Errorf("advisory+token: %v (token %v)", err, n)
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0)), set_config('idle_session_timeout', '0', false)", key)
			return err
		}, nil
	}
}

// advisoryWith is the advisory lock taken and released by the statements
// lockSQL and unlockSQL (each given the key as $1): the steps between
// advisory() and advisoryToken(), to tell what each part of the advisory
// mode's statements costs the server.
func (e *benchEnv) advisoryWith(lockSQL, unlockSQL string) lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, lockSQL, key); err != nil {
			c.Release()
			return nil, err
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, unlockSQL, key)
			return err
		}, nil
	}
}

// advisorySteps adds the advisory mode's parts to advisory() one at a time:
// the token (nextval after the grant), then the idle timeout set by the
// grant and reset by the release. advisory+token adds the server's
// identity to the last.
func (e *benchEnv) advisorySteps() []variant {
	const (
		try     = "SELECT CASE WHEN pg_try_advisory_lock(hashtextextended($1, 0)) THEN nextval('locker_locks_token') END"
		unlock  = "SELECT pg_advisory_unlock(hashtextextended($1, 0))"
		timeout = ", set_config('idle_session_timeout', '60000', false)"
		reset   = ", set_config('idle_session_timeout', '0', false)"
	)
	return []variant{
		{"advisory+nextval", e.advisoryWith(try, unlock)},
		{"advisory+nextval+timeout", e.advisoryWith(try+timeout, unlock+reset)},
	}
}

// modeSQL is the advisory mode's own statements with its arguments (the
// key's number, the sequence's name, the idle timeouts as text), sent by
// hand on a pooled connection: what the mode costs without its client code.
func (e *benchEnv) modeSQL() lockFunc {
	return func(ctx context.Context, key string) (func() error, error) {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		k := postgres.AdvisoryKey("public", "locker_locks", key)
		var n *int64
		if err := c.QueryRow(ctx, postgres.TryOnSQL, k, `"public"."locker_locks_token"`, "60000", "0").Scan(&n, nil, nil, nil); err != nil || n == nil {
			c.Release()
			return nil, fmt.Errorf("mode-sql: %v (token %v)", err, n)
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, postgres.ReleaseSQL, k, "0")
			return err
		}, nil
	}
}

func (e *benchEnv) variants() []variant {
	return []variant{
		{"locker", e.locker()},
		{"raw", e.raw("COMMIT")},
		{"raw-rb", e.raw("ROLLBACK")},
		{"advisory", e.advisory()},
		{"advisory+token", e.advisoryToken()},
		{"locker-advisory", lockerFunc(e.adv)},
	}
}

// BenchmarkUncontended: one goroutine acquires and releases one key.
func BenchmarkUncontended(b *testing.B) {
	e := newBenchEnv(b, 4)
	e.warm(b, []string{"k"}, 1)
	ctx := context.Background()
	b.Run("select1", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.pool.Exec(ctx, "SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, v := range append(e.variants(), e.advisorySteps()...) {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				unlock, err := v.f(ctx, "k")
				if err != nil {
					b.Fatal(err)
				}
				if err := unlock(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A permit of a 4-permit key (Acquire, as a permit's TryAcquire and
	// Acquire differ in their round trips).
	b.Run("locker-permit", func(b *testing.B) {
		for b.Loop() {
			lease, err := e.l.Acquire(ctx, "permits", locker.WithLimit(4))
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAdvisoryBreakdown tells where the advisory mode's server time
// goes beside pg_advisory_lock: within every iteration each step acquires
// and releases one key once, the steps taking turns at going first, and
// the median pair of each is reported (µs), so that a drift of the machine
// moves them all alike. The steps add one part at a time: the token, the
// idle timeout, the server's identity (advisory+token), then the mode's
// own statements and arguments (mode-sql). All run on one pool's
// connections: the mode itself, on its own sessions, would pay for waking
// an idle server process at every turn here, so it is compared with them
// in BenchmarkUncontended, one variant at a time.
func BenchmarkAdvisoryBreakdown(b *testing.B) {
	e := newBenchEnv(b, 4)
	e.warm(b, []string{"k"}, 1)
	ctx := context.Background()
	steps := append([]variant{{"advisory", e.advisory()}}, e.advisorySteps()...)
	steps = append(steps, variant{"advisory+token", e.advisoryToken()}, variant{"mode-sql", e.modeSQL()})
	took := make([][]time.Duration, len(steps))
	for i := 0; b.Loop(); i++ {
		for j := range steps {
			k := (i + j) % len(steps)
			t := time.Now()
			unlock, err := steps[k].f(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := unlock(); err != nil {
				b.Fatal(err)
			}
			took[k] = append(took[k], time.Since(t))
		}
	}
	for j, s := range steps {
		slices.Sort(took[j])
		b.ReportMetric(float64(took[j][len(took[j])/2].Nanoseconds())/1e3, s.name+"-p50-µs")
	}
}

// BenchmarkContendedHandoff: 32 goroutines queue for one key. handoff-p50-µs
// is the median time from a holder starting its release to the next holder
// returning from its acquire.
func BenchmarkContendedHandoff(b *testing.B) {
	const waiters = 32
	e := newBenchEnv(b, waiters+4)
	e.warm(b, []string{"hot"}, waiters)
	ctx := context.Background()
	for _, v := range e.variants() {
		b.Run(v.name, func(b *testing.B) {
			t0 := time.Now()
			var releasedAt atomic.Int64 // since t0; 0: nobody released yet
			var mu sync.Mutex
			var handoffs []time.Duration
			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for range waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for remaining.Add(-1) >= 0 {
						unlock, err := v.f(ctx, "hot")
						if err != nil {
							b.Error(err)
							return
						}
						if r := releasedAt.Swap(0); r != 0 {
							d := time.Since(t0) - time.Duration(r)
							mu.Lock()
							handoffs = append(handoffs, d)
							mu.Unlock()
						}
						releasedAt.Store(int64(time.Since(t0)))
						if err := unlock(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if len(handoffs) > 0 {
				slices.Sort(handoffs)
				b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "handoff-p50-µs")
			}
		})
	}
}

// BenchmarkManyKeys: 64 workers acquire and release random keys out of
// 1,000.
func BenchmarkManyKeys(b *testing.B) {
	const workers, nkeys = 64, 1000
	e := newBenchEnv(b, workers+8)
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	e.warm(b, keys, workers)
	ctx := context.Background()
	for _, v := range e.variants() {
		b.Run(v.name, func(b *testing.B) {
			var remaining atomic.Int64
			remaining.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for remaining.Add(-1) >= 0 {
						unlock, err := v.f(ctx, keys[rand.IntN(nkeys)])
						if err != nil {
							b.Error(err)
							return
						}
						if err := unlock(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
