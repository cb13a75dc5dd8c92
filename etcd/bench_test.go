package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The benchmarks compare, in one run against one etcd 3.6, three ways of
// doing the same work: "raw", the floor (by hand with the bare client, a
// txn put on a leased key guarded on CreateRevision == 0, then a delete,
// with no waiting); "locker", this package; and "mutex",
// go.etcd.io/etcd/client/v3/concurrency.Mutex. ns/op is per acquisition
// and release. All three share one client connection and a 15 s TTL.

const benchTTL = 15

type benchEnv struct {
	h   *harness
	cli *clientv3.Client
}

func newBenchEnv(b *testing.B) *benchEnv {
	h := newHarness(testenv.Etcd(b).Addr())
	return &benchEnv{h: h, cli: h.newClient(b)}
}

// rawOp is one acquisition by hand: a guarded txn put, then a delete.
func (e *benchEnv) rawOp(b *testing.B, ctx context.Context, lease clientv3.LeaseID, key string) {
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "", clientv3.WithLease(lease))).
		Commit()
	if err != nil || !resp.Succeeded {
		b.Fatalf("raw txn put %q: %v (succeeded %v)", key, err, resp != nil && resp.Succeeded)
	}
	if _, err := e.cli.Delete(ctx, key); err != nil {
		b.Fatalf("raw delete: %v", err)
	}
}

func (e *benchEnv) grant(b *testing.B) clientv3.LeaseID {
	resp, err := e.cli.Grant(context.Background(), benchTTL)
	if err != nil {
		b.Fatalf("grant: %v", err)
	}
	// Kept alive like the others' leases: a benchmark can outlive its TTL.
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.cli.KeepAlive(ctx, resp.ID)
	if err != nil {
		b.Fatalf("keepalive: %v", err)
	}
	go func() {
		for range ch {
		}
	}()
	b.Cleanup(func() {
		cancel()
		_, _ = e.cli.Revoke(context.Background(), resp.ID)
	})
	return resp.ID
}

func (e *benchEnv) locker(b *testing.B) locker.Locker {
	l, err := etcd.New(e.cli, etcd.WithPrefix(e.h.prefix+"locker/"), locker.WithTTL(benchTTL*1e9))
	if err != nil {
		b.Fatalf("new locker: %v", err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

func (e *benchEnv) session(b *testing.B) *concurrency.Session {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(benchTTL))
	if err != nil {
		b.Fatalf("session: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func lockerOp(b *testing.B, ctx context.Context, l locker.Locker, key string) {
	lease, err := l.Acquire(ctx, key)
	if err != nil {
		b.Fatalf("Acquire: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		b.Fatalf("Release: %v", err)
	}
}

func mutexOp(b *testing.B, ctx context.Context, s *concurrency.Session, key string) {
	m := concurrency.NewMutex(s, key)
	if err := m.Lock(ctx); err != nil {
		b.Fatalf("Mutex.Lock: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		b.Fatalf("Mutex.Unlock: %v", err)
	}
}

// variant is one way of doing a benchmark's work; round does n operations.
type variant struct {
	name  string
	round func(n int)
}

// compare runs the variants in turn, round after round, so that they share
// the machine's changing load (our test machines run other suites at the
// same time), and reports each one's time per operation — the median round
// when a round is one operation, the mean otherwise — and the ratios to the
// first variant (the raw floor) and between locker and mutex.
func compare(b *testing.B, perRound int, vs ...variant) {
	times := make([][]time.Duration, len(vs))
	for b.Loop() {
		for i, v := range vs {
			start := time.Now()
			v.round(perRound)
			times[i] = append(times[i], time.Since(start))
		}
	}
	per := make(map[string]float64, len(vs))
	for i, v := range vs {
		ts := times[i]
		var ns float64
		if perRound == 1 {
			slices.Sort(ts)
			ns = float64(ts[len(ts)/2])
		} else {
			var sum time.Duration
			for _, d := range ts {
				sum += d
			}
			ns = float64(sum) / float64(len(ts)*perRound)
		}
		per[v.name] = ns
		b.ReportMetric(ns/1e3, v.name+"-µs/op")
	}
	b.ReportMetric(per["locker"]/per["raw"], "locker/raw")
	b.ReportMetric(per["mutex"]/per["raw"], "mutex/raw")
	b.ReportMetric(per["locker"]/per["mutex"], "locker/mutex")
}

// parallel runs n operations over workers goroutines; op gets the worker
// index.
func parallel(n, workers int, op func(worker int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				op(w)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkUncontended: one client acquires and releases one key; the
// median of single operations. Target: locker ≤ 1.15 × raw.
func BenchmarkUncontended(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	lease, rawKey := e.grant(b), e.h.prefix+"raw/k"
	l := e.locker(b)
	lockerOp(b, ctx, l, "k") // the shared lease is granted once, outside the loop
	s, mutexKey := e.session(b), e.h.prefix+"mutex/k"
	compare(b, 1,
		variant{"raw", func(int) { e.rawOp(b, ctx, lease, rawKey) }},
		variant{"locker", func(int) { lockerOp(b, ctx, l, "k") }},
		variant{"mutex", func(int) { mutexOp(b, ctx, s, mutexKey) }},
	)
}

// BenchmarkContendedHandoff: 32 workers take turns on one key, 64
// acquisitions a round. The raw floor is the same writes (32 workers, a
// guarded txn put and a delete each, on keys of their own) without any
// waiting: what the server's writes cost, not a lock.
func BenchmarkContendedHandoff(b *testing.B) {
	const workers, perRound = 32, 64
	e := newBenchEnv(b)
	ctx := context.Background()
	lease := e.grant(b)
	l := e.locker(b)
	lockerOp(b, ctx, l, "handoff")
	// One session per worker: Mutexes sharing a session would all "hold"
	// the key at once (they share an etcd key).
	sessions := make([]*concurrency.Session, workers)
	for i := range sessions {
		sessions[i] = e.session(b)
	}
	compare(b, perRound,
		variant{"raw", func(n int) {
			parallel(n, workers, func(w int) { e.rawOp(b, ctx, lease, e.h.prefix+"raw-handoff/"+strconv.Itoa(w)) })
		}},
		variant{"locker", func(n int) { parallel(n, workers, func(int) { lockerOp(b, ctx, l, "handoff") }) }},
		variant{"mutex", func(n int) {
			parallel(n, workers, func(w int) { mutexOp(b, ctx, sessions[w], e.h.prefix+"mutex-handoff") })
		}},
	)
}

// BenchmarkManyKeys: 64 workers acquire and release random keys out of
// 1,000, 256 acquisitions a round.
func BenchmarkManyKeys(b *testing.B) {
	const workers, keys, perRound = 64, 1000, 256
	e := newBenchEnv(b)
	ctx := context.Background()
	key := func() string { return "many/" + strconv.Itoa(rand.IntN(keys)) }
	lease := e.grant(b)
	l := e.locker(b)
	lockerOp(b, ctx, l, "warm-up")
	sessions := make([]*concurrency.Session, workers)
	for i := range sessions {
		sessions[i] = e.session(b)
	}
	compare(b, perRound,
		// Each worker's own waiter key under the chosen lock, as locker does.
		variant{"raw", func(n int) {
			parallel(n, workers, func(w int) { e.rawOp(b, ctx, lease, fmt.Sprintf("%sraw-%s/%d", e.h.prefix, key(), w)) })
		}},
		variant{"locker", func(n int) { parallel(n, workers, func(int) { lockerOp(b, ctx, l, key()) }) }},
		variant{"mutex", func(n int) {
			parallel(n, workers, func(w int) { mutexOp(b, ctx, sessions[w], e.h.prefix+"mutex-"+key()) })
		}},
	)
}

// BenchmarkQueueRange measures what the keys queued on a lock cost the two
// txns of a handoff that read the lock's range sorted by create revision:
// the waiter's re-check after a wake-up (etcd/acquire.go, wait) and the
// create of a queued key (queue). etcd answers a sorted or
// create-revision-filtered range read by reading every key of the range
// from its backend and sorting them, whatever the limit, so both grow with
// the range. A Locker queues at most 8 keys per lock; L Lockers up to 8L.
// Every iteration runs, in turn, the re-check, the same txn reading only
// the own key (its floor), the create (a guarded put with the sorted read,
// then a delete) and the same put and delete without the read (its floor),
// with keys queued on the range; the metrics are each one's median and the
// median per-iteration difference to its floor.
func BenchmarkQueueRange(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	lease := e.grant(b)
	value := strings.Repeat("v", 64) // about a record: owner id and label
	for _, queued := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			lp := fmt.Sprintf("%squeue-range/%d/", e.h.prefix, queued)
			if _, err := e.cli.Delete(ctx, lp, clientv3.WithPrefix()); err != nil { // from an earlier -count
				b.Fatal(err)
			}
			var own string
			var ownRev int64
			for i := range queued {
				own = fmt.Sprintf("%s%x", lp, 1<<40+i)
				resp, err := e.cli.Put(ctx, own, value, clientv3.WithLease(lease))
				if err != nil {
					b.Fatal(err)
				}
				ownRev = resp.Header.Revision
			}
			newKey := lp + "new"
			steps := []struct {
				name string
				ops  []clientv3.Op
				cmp  clientv3.Cmp
				del  bool
			}{
				{"recheck-floor", []clientv3.Op{clientv3.OpGet(own, clientv3.WithKeysOnly())},
					clientv3.Compare(clientv3.CreateRevision(own), "=", ownRev), false},
				{"recheck", []clientv3.Op{clientv3.OpGet(lp, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
					clientv3.WithMaxCreateRev(ownRev-1),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))},
					clientv3.Compare(clientv3.CreateRevision(own), "=", ownRev), false},
				{"create-floor", []clientv3.Op{clientv3.OpPut(newKey, value, clientv3.WithLease(lease))},
					clientv3.Compare(clientv3.CreateRevision(newKey), "=", 0), true},
				{"create", []clientv3.Op{clientv3.OpPut(newKey, value, clientv3.WithLease(lease)),
					clientv3.OpGet(lp, clientv3.WithPrefix(),
						clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))},
					clientv3.Compare(clientv3.CreateRevision(newKey), "=", 0), true},
			}
			lat := make([][]time.Duration, len(steps))
			for i := 0; b.Loop(); i++ {
				for j := range steps {
					k := (i + j) % len(steps)
					s := steps[k]
					start := time.Now()
					resp, err := e.cli.Txn(ctx).If(s.cmp).Then(s.ops...).Commit()
					if err != nil || !resp.Succeeded {
						b.Fatalf("%s: %v (succeeded %v)", s.name, err, resp != nil && resp.Succeeded)
					}
					if s.del {
						if _, err := e.cli.Delete(ctx, newKey); err != nil {
							b.Fatal(err)
						}
					}
					lat[k] = append(lat[k], time.Since(start))
				}
			}
			for k, s := range steps {
				if k%2 == 1 {
					d := make([]time.Duration, len(lat[k]))
					for i := range d {
						d[i] = lat[k][i] - lat[k-1][i]
					}
					slices.Sort(d)
					b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, s.name+"-Δµs")
				}
				ts := slices.Sorted(slices.Values(lat[k]))
				b.ReportMetric(float64(ts[len(ts)/2].Nanoseconds())/1e3, s.name+"-µs")
			}
		})
	}
}
