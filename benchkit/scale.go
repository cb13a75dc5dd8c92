package benchkit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/distlock/locker"
)

// The scale workload measures how cost grows with the work, in three
// curves per backend:
//
//   - held: N leases held at once by one Locker, auto-refresh on. At each N:
//     client heap and goroutines per held lease, server memory per lock,
//     refreshes per second while they are held, and the p50 of
//     acquire+release of a fresh key beside them.
//   - waiters: W goroutines handing one key round, in one Locker and spread
//     over Spread Lockers: handoff p50 and p99, server CPU per handoff.
//   - lockers: L Lockers (each its own clients, as L processes would have),
//     one goroutine each, acquire+release on distinct keys: throughput.
//
// It runs alone (not interleaved with the other workloads): its sizes span
// three orders of magnitude and the held curve must own the process's heap.

// ScaleConfig holds the sizes of the scale workload.
type ScaleConfig struct {
	Held     []int // held curve: numbers of leases held at once
	Waiters  []int // waiters curve: numbers of waiters on one key
	Spread   int   // waiters curve: Lockers the waiters are spread over (besides one Locker)
	Lockers  []int // lockers curve: numbers of Lockers
	Probe    int   // held curve: acquire+release pairs timed at each N
	Handoffs int   // waiters curve: handoffs timed per W, after W untimed grants
	Ops      int   // lockers curve: acquire+release pairs per Locker
	// TTL is the TTL of the held leases; they refresh at a third of it.
	TTL time.Duration
	// Window is how long refreshes are counted at each N; 0: one TTL
	// (three refresh periods, so that the phase of the refreshes does not
	// matter).
	Window time.Duration
	Prefix string
}

// NewScaleConfig returns the sizes: N = 10² … 10⁵, W = 1 … 1,000
// over one Locker and 32, L = 1 … 64.
func NewScaleConfig() *ScaleConfig {
	return &ScaleConfig{
		Held: []int{100, 1000, 10000, 100000}, Waiters: []int{1, 10, 100, 1000}, Spread: 32,
		Lockers: []int{1, 2, 4, 8, 16, 32, 64}, Probe: 200, Handoffs: 200, Ops: 200,
		TTL: locker.DefaultTTL, Prefix: RandomPrefix("scale"),
	}
}

// Quick shrinks c to a run of seconds, for CI.
func (c *ScaleConfig) Quick() {
	c.Held, c.Waiters, c.Spread, c.Lockers = []int{10, 100}, []int{1, 10}, 4, []int{1, 4}
	c.Probe, c.Handoffs, c.Ops = 30, 20, 20
	// A refresh may take a third of the TTL: the default TTL's 5 s leaves
	// room for a loaded CI machine under the race detector, where 333 ms
	// (etcd) and 1.7 s (PostgreSQL advisory, 100 leases) did not. The
	// window covers one refresh period.
	c.TTL, c.Window = locker.DefaultTTL, 6*time.Second
}

// Validate reports the first size that makes no sense.
func (c *ScaleConfig) Validate() error {
	for name, ns := range map[string][]int{"held": c.Held, "scale-waiters": c.Waiters, "lockers": c.Lockers} {
		for _, n := range ns {
			if n < 1 {
				return fmt.Errorf("--%s %d: want at least 1", name, n)
			}
		}
	}
	if c.Spread < 1 || c.Probe < 1 || c.Handoffs < 1 || c.Ops < 1 {
		return errors.New("--spread, --probe, --handoffs and --ops must be at least 1")
	}
	if c.TTL <= 0 || c.Window < 0 {
		return errors.New("--ttl must be positive and --refresh-window not negative")
	}
	return nil
}

func (c *ScaleConfig) window() time.Duration {
	if c.Window > 0 {
		return c.Window
	}
	return c.TTL
}

// A ScaleTarget is one backend the scale workload measures.
type ScaleTarget struct {
	Name string
	// Open opens a new Locker of the backend with opts (each call its
	// own clients).
	Open func(ctx context.Context, opts ...locker.Option) (locker.Locker, error)
	// Stat samples the server; nil when there is no probe for it.
	Stat ServerStat
	// Budget caps N and W where each held lease or waiter pins a server
	// connection (PostgreSQL FOR UPDATE); 0 for no cap.
	Budget int
	// Refreshes, if set, returns an option for Open and a count of the
	// refreshes made by the Lockers opened with it (lockctl reads the
	// locker.refresh.duration histogram); without it refreshes are not
	// counted.
	Refreshes func() (locker.Option, func(context.Context) uint64)
}

// ServerStat samples a lock server's own accounting.
type ServerStat interface {
	Sample(ctx context.Context) (ServerSample, error)
	Close() error
}

// ServerSample is one reading of a server.
type ServerSample struct {
	// Memory is the server's measure of what locks cost it, in bytes
	// (Redis used_memory, etcd RSS, ZooKeeper approximate data size,
	// PostgreSQL lock table size); MemoryWhat says which.
	Memory     float64
	MemoryWhat string
	// CPU is the server's CPU time in seconds; negative when unknown.
	CPU float64
	// Detail holds further figures by name (etcd db size, znodes,
	// connections, advisory locks).
	Detail map[string]float64
}

// ScalePoint is one measured point of a curve.
type ScalePoint struct {
	Curve  string `json:"curve"` // "held", "waiters", "waiters-spread", "lockers"
	Target string `json:"target"`
	X      int    `json:"x"` // N, W or L
	// Lockers the waiters were spread over (waiters curves).
	Lockers int `json:"lockers,omitempty"`

	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// OpsPerSec: handoffs/s (waiters), acquire+release pairs/s (lockers),
	// leases taken/s while building N (held).
	OpsPerSec float64 `json:"ops_per_sec"`

	// Held curve.
	HeapPerLease       float64            `json:"heap_per_lease_bytes,omitempty"`
	StackPerLease      float64            `json:"stack_per_lease_bytes,omitempty"` // goroutine stacks
	GoroutinesPerLease float64            `json:"goroutines_per_lease,omitempty"`
	ServerPerLock      float64            `json:"server_bytes_per_lock,omitempty"`
	ServerWhat         string             `json:"server_measure,omitempty"`
	DetailPerLock      map[string]float64 `json:"server_detail_per_lock,omitempty"`
	RefreshPerSec      float64            `json:"refresh_per_sec,omitempty"`
	// ClientCPU is the CPU this process used per second of wall time
	// while the N leases were held and nothing else ran: their refreshes.
	ClientCPU float64 `json:"client_cpu_per_sec,omitempty"`
	// CPUPerOp is server CPU seconds per grant (waiters: every grant of
	// the run, the timed handoffs and each waiter's last one after them,
	// as the CPU is sampled once all have ended) or pair (lockers); 0 when
	// unknown.
	CPUPerOp float64 `json:"server_cpu_per_op_s,omitempty"`

	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Skipped says why the point was not measured (a connection budget).
	Skipped string `json:"skipped,omitempty"`
}

// Scale runs the three curves on every target, one target after another.
// A failed point does not stop the others; only a cancelled ctx does.
func Scale(ctx context.Context, c *ScaleConfig, targets []*ScaleTarget, p *Progress) ([]*ScalePoint, error) {
	total := 0
	for range targets {
		total += sum(c.Held) + len(c.Waiters)*2*c.Handoffs + sum(c.Lockers)*c.Ops
	}
	p.start(total)
	defer p.finish()
	var out []*ScalePoint
	var errs []error
	for i, t := range targets {
		prefix := fmt.Sprintf("%st%d/", c.Prefix, i)
		for _, curve := range []func(context.Context, *ScaleConfig, *ScaleTarget, string, *Progress) ([]*ScalePoint, error){
			heldCurve, waitersCurve, lockersCurve,
		} {
			pts, err := curve(ctx, c, t, prefix, p)
			out = append(out, pts...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.Name, err))
				if ctx.Err() != nil {
					return out, errors.Join(errs...)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

func sum(ns []int) int {
	s := 0
	for _, n := range ns {
		s += n
	}
	return s
}

// clientState is the process's live heap (after a full collection),
// goroutine stacks and goroutines.
func clientState() (heap, stacks uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse, runtime.NumGoroutine()
}

// sample reads the target's server, or nothing without a probe.
func (t *ScaleTarget) sample(ctx context.Context) (ServerSample, bool) {
	if t.Stat == nil {
		return ServerSample{}, false
	}
	s, err := t.Stat.Sample(ctx)
	return s, err == nil
}

// heldCurve holds N leases at once for each N, growing.
func heldCurve(ctx context.Context, c *ScaleConfig, t *ScaleTarget, prefix string, p *Progress) ([]*ScalePoint, error) {
	var openOpts []locker.Option
	count := func(context.Context) uint64 { return 0 }
	if t.Refreshes != nil {
		var o locker.Option
		o, count = t.Refreshes()
		openOpts = append(openOpts, o)
	}
	l, err := t.Open(ctx, openOpts...)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	opts := []locker.Option{locker.WithTTL(c.TTL), locker.WithAutoRefresh(true)}
	// Warm: connections open, schema made, before the first baseline.
	if _, err := uncontended(ctx, &Subject{Mutex: LockerMutex(l, opts...)}, prefix+"warm", 10, nil); err != nil {
		return nil, err
	}
	var out []*ScalePoint
	var errs []error
	for _, n := range c.Held {
		pt := &ScalePoint{Curve: "held", Target: t.Name, X: n}
		out = append(out, pt)
		if t.Budget > 0 && n > t.Budget {
			pt.Skipped = fmt.Sprintf("above the connection budget of %d", t.Budget)
			p.add(n)
			continue
		}
		p.label(fmt.Sprintf("scale %s: holding %d", t.Name, n))
		if err := heldPoint(ctx, c, t, l, count, opts, fmt.Sprintf("%sheld%d/", prefix, n), pt, p); err != nil {
			errs = append(errs, fmt.Errorf("held %d: %w", n, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

func heldPoint(ctx context.Context, c *ScaleConfig, t *ScaleTarget, l locker.Locker, refreshes func(context.Context) uint64, opts []locker.Option, prefix string, pt *ScalePoint, p *Progress) error {
	heap0, stack0, g0 := clientState()
	srv0, haveSrv := t.sample(ctx)
	var errs errorCount
	leases := make([]locker.Lease, pt.X)
	// Many acquisitions at once, as a service taking its locks would; a
	// pool-limited backend queues them on its own.
	workers := min(64, pt.X)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= pt.X || ctx.Err() != nil {
					return
				}
				lease, err := l.Acquire(ctx, fmt.Sprintf("%s%d", prefix, k), opts...)
				if err != nil {
					errs.add(err)
					return
				}
				leases[k] = lease
				p.add(1)
			}
		}()
	}
	wg.Wait()
	pt.OpsPerSec = float64(pt.X) / time.Since(t0).Seconds()
	defer func() { _, _ = releaseAll(leases) }()
	if errs.n.Load() > 0 {
		pt.Errors, pt.FirstError = int(errs.n.Load()), errs.first.Error()
		return fmt.Errorf("%d acquisitions failed; first: %w", pt.Errors, errs.first)
	}
	heap1, stack1, g1 := clientState()
	n := float64(pt.X)
	pt.HeapPerLease = (float64(heap1) - float64(heap0)) / n
	pt.StackPerLease = (float64(stack1) - float64(stack0)) / n
	pt.GoroutinesPerLease = float64(g1-g0) / n

	// Refreshes while the N leases are held and nothing else happens.
	r0, w0, cpu0 := refreshes(ctx), time.Now(), processCPU()
	select {
	case <-time.After(c.window()):
	case <-ctx.Done():
		return ctx.Err()
	}
	w := time.Since(w0).Seconds()
	pt.RefreshPerSec = float64(refreshes(ctx)-r0) / w
	pt.ClientCPU = (processCPU() - cpu0).Seconds() / w
	if srv1, ok := t.sample(ctx); ok && haveSrv {
		pt.ServerPerLock = (srv1.Memory - srv0.Memory) / n
		pt.ServerWhat = srv1.MemoryWhat
		pt.DetailPerLock = map[string]float64{}
		for k, v := range srv1.Detail {
			pt.DetailPerLock[k] = (v - srv0.Detail[k]) / n
		}
	}

	// Acquire+release of fresh keys beside the N held.
	r, err := uncontended(ctx, &Subject{Mutex: LockerMutex(l, opts...)}, prefix+"probe", c.Probe, nil)
	if err != nil {
		return err
	}
	s := r.Summary()
	pt.P50, pt.P99 = s.P50, s.P99
	// Leases lost while held show as failed releases.
	if lost, first := releaseAll(leases); lost > 0 {
		pt.Errors, pt.FirstError = lost, first.Error()
		return fmt.Errorf("%d of %d held leases lost; first: %w", lost, pt.X, first)
	}
	return nil
}

// releaseAll releases the leases still held, several at once, and returns
// how many releases failed and the first lease's error (its loss, for a
// lost lease); it clears the slice so a second call is a no-op.
func releaseAll(leases []locker.Lease) (int, error) {
	var failed sync.Mutex
	n := 0
	var first error
	var wg sync.WaitGroup
	ch := make(chan locker.Lease)
	for range min(64, len(leases)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range ch {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := l.Release(ctx); err != nil {
					failed.Lock()
					if n++; first == nil {
						first = errors.Join(l.Err(), err)
					}
					failed.Unlock()
				}
				cancel()
			}
		}()
	}
	for i, l := range leases {
		if l != nil {
			ch <- l
			leases[i] = nil
		}
	}
	close(ch)
	wg.Wait()
	return n, first
}

// openMany opens n Lockers of t, closing them all if one fails.
func openMany(ctx context.Context, t *ScaleTarget, n int) ([]locker.Locker, func(), error) {
	var ls []locker.Locker
	closeAll := func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}
	for range n {
		l, err := t.Open(ctx)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ls = append(ls, l)
	}
	return ls, closeAll, nil
}

// waitersCurve hands one key round W waiters, first all in one Locker, then
// spread over c.Spread Lockers.
func waitersCurve(ctx context.Context, c *ScaleConfig, t *ScaleTarget, prefix string, p *Progress) ([]*ScalePoint, error) {
	ls, closeAll, err := openMany(ctx, t, c.Spread)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	var out []*ScalePoint
	var errs []error
	for _, mode := range []struct {
		curve   string
		lockers []locker.Locker
	}{{"waiters", ls[:1]}, {"waiters-spread", ls}} {
		ms := make([]Mutex, len(mode.lockers))
		for i, l := range mode.lockers {
			ms[i] = LockerMutex(l, locker.WithTTL(c.TTL))
		}
		for _, w := range c.Waiters {
			pt := &ScalePoint{Curve: mode.curve, Target: t.Name, X: w, Lockers: min(w, len(ms))}
			out = append(out, pt)
			if t.Budget > 0 && w > t.Budget {
				pt.Skipped = fmt.Sprintf("above the connection budget of %d", t.Budget)
				p.add(c.Handoffs)
				continue
			}
			p.label(fmt.Sprintf("scale %s: %s %d", t.Name, mode.curve, w))
			key := fmt.Sprintf("%s%s/%d", prefix, mode.curve, w)
			// Warm: every waiter's Locker has its connections.
			if _, err := handoff(ctx, ms, key, len(ms), len(ms), 0, nil); err != nil {
				errs = append(errs, fmt.Errorf("%s %d (warm-up): %w", mode.curve, w, err))
			}
			s0, ok0 := t.sample(ctx)
			// The first w grants absorb the w Acquires' arrival at once
			// (see handoff): not what a handoff costs as W grows.
			r, err := handoff(ctx, ms, key, w, c.Handoffs, w, p)
			s1, ok1 := t.sample(ctx)
			fill(pt, r, err)
			if ok0 && ok1 && s0.CPU >= 0 && r != nil && r.grants > 0 {
				pt.CPUPerOp = (s1.CPU - s0.CPU) / float64(r.grants)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %d: %w", mode.curve, w, err))
				if ctx.Err() != nil {
					return out, errors.Join(errs...)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

// fill copies a run's figures into pt.
func fill(pt *ScalePoint, r *Result, err error) {
	if r != nil {
		s := r.Summary()
		pt.P50, pt.P99, pt.OpsPerSec = s.P50, s.P99, r.OpsPerSec()
		pt.Errors, pt.FirstError = r.Errors, r.FirstError
	}
	if err != nil && pt.FirstError == "" {
		pt.Errors, pt.FirstError = max(pt.Errors, 1), err.Error()
	}
}

// lockersCurve has L Lockers, one goroutine each, acquire and release keys
// of their own.
func lockersCurve(ctx context.Context, c *ScaleConfig, t *ScaleTarget, prefix string, p *Progress) ([]*ScalePoint, error) {
	if len(c.Lockers) == 0 {
		return nil, nil
	}
	ls, closeAll, err := openMany(ctx, t, slices.Max(c.Lockers))
	if err != nil {
		return nil, err
	}
	defer closeAll()
	var out []*ScalePoint
	var errs []error
	for _, n := range c.Lockers {
		pt := &ScalePoint{Curve: "lockers", Target: t.Name, X: n}
		out = append(out, pt)
		p.label(fmt.Sprintf("scale %s: %d Lockers", t.Name, n))
		ms := make([]Mutex, n)
		for i := range ms {
			ms[i] = LockerMutex(ls[i], locker.WithTTL(c.TTL))
		}
		key := fmt.Sprintf("%slockers%d/", prefix, n)
		if _, err := distinct(ctx, ms, key+"warm", 5, nil); err != nil {
			fill(pt, nil, err)
			errs = append(errs, fmt.Errorf("lockers %d (warm-up): %w", n, err))
			continue
		}
		s0, ok0 := t.sample(ctx)
		r, err := distinct(ctx, ms, key, c.Ops, p)
		s1, ok1 := t.sample(ctx)
		fill(pt, r, err)
		if ok0 && ok1 && s0.CPU >= 0 && r != nil && r.Ops > 0 {
			pt.CPUPerOp = (s1.CPU - s0.CPU) / float64(r.Ops)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lockers %d: %w", n, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	return out, errors.Join(errs...)
}

// distinct has one goroutine per Mutex acquire and release n keys of its
// own, in turn.
func distinct(ctx context.Context, ms []Mutex, prefix string, n int, p *Progress) (*Result, error) {
	var (
		lat  = latencies{all: make([]time.Duration, 0, n*len(ms))}
		errs errorCount
		wg   sync.WaitGroup
	)
	t0 := time.Now()
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n)
			defer lat.add(&mine)
			for k := range n {
				d, err := timedPair(ctx, m, fmt.Sprintf("%s%d/%d", prefix, i, k))
				if err != nil {
					errs.add(err)
					return
				}
				mine = append(mine, d)
				p.add(1)
			}
		}()
	}
	wg.Wait()
	return pairsResult(&lat, &errs, t0, n*len(ms))
}
