package benchkit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
)

// The flash sale: c.Stock units, c.Buyers buyers all arriving at once. Each
// buyer reads the stock, and if it is positive writes it back one lower and
// counts a sale. Read and write are separate steps with a yield between them,
// the shape of every read-modify-write against a remote store; without a lock
// buyers interleave there and sell the same unit twice.

// stockResource names the guarded resource in the fencing guard.
const stockResource = "stock"

// inventory is the resource the lock protects. Its fields are atomics only so
// that the unlocked control run is a logical race (lost updates) and not a Go
// data race, which the race detector would rightly refuse; the atomics do not
// make read-then-write atomic.
type inventory struct {
	stock atomic.Int64
	sold  atomic.Int64
}

// crowd runs buyer(i) for n buyers arriving at once: all goroutines are
// started before the crowd may proceed. The first early buyers do not wait
// for the others; the crowd proceeds once gate is closed (nil: at once). It
// returns the wall time and each buyer's latency.
func crowd(n, early int, gate <-chan struct{}, p *Progress, buyer func(i int)) (time.Duration, []time.Duration) {
	lat := make([]time.Duration, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i >= early {
				<-start
			}
			t0 := time.Now()
			buyer(i)
			lat[i] = time.Since(t0)
			p.add(1)
		}()
	}
	if gate != nil {
		<-gate
	}
	close(start)
	wg.Wait()
	return time.Since(t0), lat
}

func saleResult(c *Config, inv *inventory, elapsed time.Duration, lat []time.Duration) *Result {
	r := &Result{
		Sales: true,
		Stock: c.Stock, Sold: int(inv.sold.Load()), Left: int(inv.stock.Load()),
		Ops: c.Buyers, Elapsed: elapsed, samples: lat,
	}
	r.Oversold = max(0, r.Sold-r.Stock)
	return r
}

// flashSaleUnlocked is the control run: the same buyers with no lock.
func flashSaleUnlocked(c *Config, p *Progress) *Result {
	inv := &inventory{}
	inv.stock.Store(int64(c.Stock))
	elapsed, lat := crowd(c.Buyers, 0, nil, p, func(int) {
		if s := inv.stock.Load(); s > 0 {
			runtime.Gosched() // the gap between read and write
			inv.stock.Store(s - 1)
			inv.sold.Add(1)
		}
	})
	return saleResult(c, inv, elapsed, lat)
}

// flashSale runs the sale under the lock. Every buyer takes the lock with
// locker.Do; both its read and its write go through the fencing guard with
// its token, so that a holder whose lease ran out can touch the stock neither
// after a newer holder read it nor after a newer holder wrote it. (Fencing
// only the write would let a stale holder write between a newer holder's read
// and write: a lost update the guard cannot see.)
//
// The first c.Pauses buyers instead acquire with a short TTL and no refresh,
// ahead of the crowd so that the stock is still there for them to read, and
// then stall — like a process in a long GC
// pause — until their lease has ended and a newer holder has written. Their
// write must then be refused.
func flashSale(ctx context.Context, c *Config, sub *Subject, key string, p *Progress) (*Result, error) {
	inv := &inventory{}
	inv.stock.Store(int64(c.Stock))
	guard := fencing.NewMemory()
	var refused, paused, finished atomic.Int64
	othersDone := func() bool { return finished.Load() >= int64(c.Buyers-1) }
	var errs errorCount

	// A refused read or write is fencing doing its job, not a failure: the
	// holder's lease ended before it got there (a paused holder's short TTL
	// can run out before its first read on a loaded machine).
	read := func(ctx context.Context, token uint64) (int64, error) {
		var s int64
		err := guard.Write(ctx, stockResource, token, func() error { s = inv.stock.Load(); return nil })
		if errors.Is(err, fencing.ErrStaleToken) {
			refused.Add(1)
			return 0, nil
		}
		return s, err
	}
	write := func(ctx context.Context, token uint64, s int64) error {
		runtime.Gosched() // the same gap between read and write as the control run
		err := guard.Write(ctx, stockResource, token, func() error {
			inv.stock.Store(s - 1)
			inv.sold.Add(1)
			return nil
		})
		if errors.Is(err, fencing.ErrStaleToken) {
			refused.Add(1)
			return nil
		}
		return err
	}

	buy := func(ctx context.Context, lease locker.Lease) error {
		s, err := read(ctx, lease.Token())
		if err != nil || s <= 0 {
			return err
		}
		return write(ctx, lease.Token(), s)
	}

	// The crowd waits until a paused buyer holds the lock, so that at least
	// one pause is certain; the other paused buyers queue before the crowd
	// arrives, most likely ahead of it.
	var (
		gate     chan struct{}
		openGate sync.Once
	)
	if c.Pauses > 0 {
		gate = make(chan struct{})
	}
	buyAfterPause := func() error {
		lease, err := sub.Locker.Acquire(ctx, key, locker.WithTTL(c.PauseTTL), locker.WithAutoRefresh(false))
		for errors.Is(err, locker.ErrLeaseLost) && ctx.Err() == nil {
			// Granted, but it reached us after its short TTL: the contract
			// reports that as lost. Queue again.
			lease, err = sub.Locker.Acquire(ctx, key, locker.WithTTL(c.PauseTTL), locker.WithAutoRefresh(false))
		}
		openGate.Do(func() { close(gate) })
		if err != nil {
			return err
		}
		s, err := read(ctx, lease.Token())
		if err == nil && s > 0 {
			paused.Add(1)
			stall(ctx, lease, guard, othersDone)
			// A paused process wakes up unaware and carries on: it does not
			// look at its context or lease, only the guard stops it.
			err = write(context.WithoutCancel(ctx), lease.Token(), s)
		}
		if rerr := lease.Release(ctx); rerr != nil && !errors.Is(rerr, locker.ErrLeaseLost) {
			err = errors.Join(err, rerr)
		}
		return err
	}

	var requeued atomic.Int64
	elapsed, lat := crowd(c.Buyers, c.Pauses, gate, p, func(i int) {
		var err error
		if i < c.Pauses {
			err = buyAfterPause()
		} else {
			err = locker.Do(ctx, sub.Locker, key, buy, locker.WithTTL(c.TTL))
			for errors.Is(err, locker.ErrLeaseLost) && ctx.Err() == nil {
				// The buyer got no CPU for its renewals within the TTL
				// (10,000 goroutines on a loaded machine): as a real
				// buyer would, it queues again. Whatever it did with the
				// lease the guard has judged by its token.
				requeued.Add(1)
				err = locker.Do(ctx, sub.Locker, key, buy, locker.WithTTL(c.TTL))
			}
		}
		if err != nil {
			errs.add(err)
		}
		finished.Add(1)
	})
	r := saleResult(c, inv, elapsed, lat)
	r.Refused, r.Paused, r.Requeued = int(refused.Load()), int(paused.Load()), int(requeued.Load())
	errs.fill(r)
	return r, ctx.Err()
}

// stall waits as a paused holder would: past the end of its lease, and until
// a newer holder has used the resource, so that the stale write that follows
// meets a guard that knows better. If every other buyer has finished, nobody
// newer will come: the write is then admitted, which is right, because nobody
// touched the stock meanwhile. stallBound only stops a backend that never
// expires a lease from hanging the run.
func stall(ctx context.Context, lease locker.Lease, guard *fencing.Memory, othersDone func() bool) {
	bound := time.NewTimer(stallBound)
	defer bound.Stop()
	select {
	case <-lease.Done():
	case <-bound.C:
		return
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for guard.Highest(stockResource) <= lease.Token() && !othersDone() {
		select {
		case <-tick.C:
		case <-bound.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stallBound is far beyond any pause TTL a bench would use.
const stallBound = time.Minute
