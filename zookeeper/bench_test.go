package zookeeper_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// The benchmarks put this package beside the raw floor (the same ZooKeeper
// operations by hand with the bare client: create an ephemeral sequential
// node, get the children, delete) and beside go-zookeeper's own zk.Lock, all
// against the same server in the same run. Compare ratios, not absolutes.

// rawLockUnlock is the floor of one uncontended acquire+release.
func rawLockUnlock(b *testing.B, c *zk.Conn, dir string) {
	p, err := c.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := c.Children(dir); err != nil {
		b.Fatal(err)
	}
	if err := c.Delete(p, -1); err != nil {
		b.Fatal(err)
	}
}

func benchDir(b *testing.B, c *zk.Conn, root, name string) string {
	b.Helper()
	for _, p := range []string{"/locker-test", root, root + "/" + name} {
		if _, err := c.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			b.Fatal(err)
		}
	}
	return root + "/" + name
}

func BenchmarkUncontended(b *testing.B) {
	addr := []string{testenv.ZooKeeper(b).Addr()}
	root := freshRoot(b)
	ctx := context.Background()

	b.Run("raw", func(b *testing.B) {
		c := rawConn(b, addr, nil)
		dir := benchDir(b, c, root, "raw")
		for b.Loop() {
			rawLockUnlock(b, c, dir)
		}
	})
	b.Run("zk.Lock", func(b *testing.B) {
		c := rawConn(b, addr, nil)
		dir := benchDir(b, c, root, "zklock")
		m := zk.NewLock(c, dir, zk.WorldACL(zk.PermAll))
		for b.Loop() {
			if err := m.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("locker", func(b *testing.B) {
		l := dial(b, addr, root)
		for b.Loop() {
			lease, err := l.Acquire(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHandoff: 32 waiters on one key, each op one acquire+release, so
// every op is a handoff from one waiter to the next.
func BenchmarkHandoff(b *testing.B) {
	addr := []string{testenv.ZooKeeper(b).Addr()}
	root := freshRoot(b)
	const waiters = 32

	b.Run("raw+watch", func(b *testing.B) {
		// The floor: the same queue by hand, each waiter watching its
		// predecessor.
		conns := make([]*zk.Conn, waiters)
		for i := range conns {
			conns[i] = rawConn(b, addr, nil)
		}
		dir := benchDir(b, conns[0], root, "raw")
		runHandoff(b, waiters, func(i int) {
			c := conns[i]
			p, err := c.Create(dir+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
			if err != nil {
				b.Fatal(err)
			}
			me := path.Base(p)
			for {
				kids, _, err := c.Children(dir)
				if err != nil {
					b.Fatal(err)
				}
				pred := ""
				for _, k := range kids {
					if k < me && k > pred {
						pred = k
					}
				}
				if pred == "" {
					break
				}
				ok, _, w, err := c.ExistsW(dir + "/" + pred)
				if err != nil {
					b.Fatal(err)
				}
				if ok {
					<-w
				}
			}
			if err := c.Delete(p, -1); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("zk.Lock", func(b *testing.B) {
		locks := make([]*zk.Lock, waiters)
		for i := range locks {
			c := rawConn(b, addr, nil)
			locks[i] = zk.NewLock(c, benchDir(b, c, root, "zklock"), zk.WorldACL(zk.PermAll))
		}
		runHandoff(b, waiters, func(i int) {
			if err := locks[i].Lock(); err != nil {
				b.Fatal(err)
			}
			if err := locks[i].Unlock(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("locker", func(b *testing.B) {
		ls := make([]locker.Locker, waiters)
		for i := range ls {
			ls[i] = dial(b, addr, root)
		}
		ctx := context.Background()
		runHandoff(b, waiters, func(i int) {
			lease, err := ls[i].Acquire(ctx, "k")
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// runHandoff runs b.N ops over n goroutines, each with its own client.
func runHandoff(b *testing.B, n int, op func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				op(i)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkManyKeys: 64 workers over 1,000 keys.
func BenchmarkManyKeys(b *testing.B) {
	addr := []string{testenv.ZooKeeper(b).Addr()}
	root := freshRoot(b)
	const workers, keys = 64, 1000

	b.Run("raw", func(b *testing.B) {
		c := rawConn(b, addr, nil)
		dirs := make([]string, keys)
		for i := range dirs {
			dirs[i] = benchDir(b, c, root, fmt.Sprintf("raw%d", i))
		}
		runHandoff(b, workers, func(int) { rawLockUnlock(b, c, dirs[rand.IntN(keys)]) })
	})
	b.Run("zk.Lock", func(b *testing.B) {
		c := rawConn(b, addr, nil)
		dirs := make([]string, keys)
		for i := range dirs {
			dirs[i] = benchDir(b, c, root, fmt.Sprintf("zk%d", i))
		}
		runHandoff(b, workers, func(int) {
			m := zk.NewLock(c, dirs[rand.IntN(keys)], zk.WorldACL(zk.PermAll))
			if err := m.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := m.Unlock(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("locker", func(b *testing.B) {
		l := dial(b, addr, root)
		ctx := context.Background()
		// Make every key's directory first, as the floor's are made before
		// it is timed (untimed; the server removes them again after a minute
		// or so empty, being containers).
		var warm sync.WaitGroup
		var nextKey atomic.Int64
		for range workers {
			warm.Add(1)
			go func() {
				defer warm.Done()
				for k := nextKey.Add(1) - 1; k < keys; k = nextKey.Add(1) - 1 {
					lease, err := l.Acquire(ctx, fmt.Sprintf("k%d", k))
					if err != nil {
						b.Error(err)
						return
					}
					_ = lease.Release(ctx)
				}
			}()
		}
		warm.Wait()
		runHandoff(b, workers, func(int) {
			lease, err := l.Acquire(ctx, fmt.Sprintf("k%d", rand.IntN(keys)))
			if err != nil {
				b.Fatal(err)
			}
			if err := lease.Release(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkUncontendedInterleaved runs the raw floor, zk.Lock and this
// package in turn within every iteration, so that all three see the same
// server, disk and machine load (a shared machine's noise otherwise swamps
// the differences), and reports each one's mean and the ratios.
func BenchmarkUncontendedInterleaved(b *testing.B) {
	addr := []string{testenv.ZooKeeper(b).Addr()}
	root := freshRoot(b)
	ctx := context.Background()
	c := rawConn(b, addr, nil)
	rawDir := benchDir(b, c, root, "raw")
	zc := rawConn(b, addr, nil)
	m := zk.NewLock(zc, benchDir(b, zc, root, "zklock"), zk.WorldACL(zk.PermAll))
	l := dial(b, addr, root)
	var raw, zkl, lck time.Duration
	for b.Loop() {
		t0 := time.Now()
		rawLockUnlock(b, c, rawDir)
		t1 := time.Now()
		if err := m.Lock(); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		lease, err := l.Acquire(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		raw, zkl, lck = raw+t1.Sub(t0), zkl+t2.Sub(t1), lck+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(float64(zkl.Nanoseconds())/n, "zklock-ns/op")
	b.ReportMetric(float64(lck.Nanoseconds())/n, "locker-ns/op")
	b.ReportMetric(float64(lck)/float64(raw), "locker/raw")
	b.ReportMetric(float64(lck)/float64(zkl), "locker/zklock")
}
