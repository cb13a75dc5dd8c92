package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/history"
)

// A Fault is one kind of failure a Nemesis injects: pause the server, cut
// a client off, partition the leader… Inject breaks the service and says,
// through h.Undo, how to heal each thing it broke, as it breaks it: a fault
// that fails half-way is still healed completely.
type Fault struct {
	// Name labels the fault in tables and fault windows.
	Name string
	// Inject breaks the service. It reports failures through h.TB (Fatalf),
	// which the Nemesis turns into an error of the run.
	Inject func(h *Harm)
	// MinHold is the shortest time the fault lasts, even when the run ends
	// earlier: a restart delayed past the TTL must be delayed.
	MinHold time.Duration
	// Hold, if set, is the mean time the fault lasts instead of the
	// nemesis's (a restart "at once" holds a millisecond).
	Hold time.Duration
	// TTL, if set, is the lease TTL of runs under this fault instead of
	// the deployment's.
	TTL time.Duration
	// RunFor, if set, is the least time the clients of a run under this
	// fault start operations (RunOptions.Duration): a fault that takes
	// long to inject must be met by the clients all through.
	RunFor time.Duration
	// Outside, when not empty, says why the fault lies outside the
	// backend's stated guarantee of mutual exclusion. Runs under it are
	// judged by the weaker, fencing properties the backend does claim
	// (see Judge), and their mutual-exclusion violations are counted apart.
	Outside string
}

// Harm is what an injection has broken so far.
type Harm struct {
	// TB is where testenv reports; its Fatalf aborts the injection.
	TB  testing.TB
	Rng *rand.Rand
	// Deployment is the service being broken.
	D     *Deployment
	undos []func(testing.TB)
}

// Undo registers how to heal what was just broken. Heals run in reverse
// order, each retried like Do.
func (h *Harm) Undo(f func(testing.TB)) { h.undos = append(h.undos, f) }

// Do runs a testenv fault control, retrying it twice after a failure: on a
// loaded machine Docker sometimes fails to freeze a container ("OCI runtime
// pause failed: unable to freeze"), which says nothing about the backend.
// A control that fails after all three tries reports every try's failure:
// the first may have done part of its work and caused the others.
func (h *Harm) Do(f func(testing.TB)) { retry(h.TB.(*faultTB), f) }

func retry(tb *faultTB, f func(testing.TB)) {
	var errs []string
	for i := 0; ; i++ {
		err := tb.try(func() { f(tb) })
		if err == nil {
			return
		}
		errs = append(errs, fmt.Sprintf("try %d: %v", i+1, err))
		if i == 2 {
			panic(tbFailure{strings.Join(errs, "; ")})
		}
		time.Sleep(time.Duration(i+1) * 250 * time.Millisecond)
	}
}

// Nemesis injects one fault again and again while a history's clients
// run: a quiet spell, the fault for a hold, healed, and so on, until the run
// ends; then it heals what is still broken and returns. It implements
// history.Nemesis.
type Nemesis struct {
	D     *Deployment
	Fault Fault
	// TTL is the runs' lease TTL (default the deployment's).
	TTL time.Duration
	// Quiet is the mean time between faults, Hold the mean time a fault
	// lasts (both jittered ±50%). Defaults: TTL/2 and 1.5×TTL.
	Quiet, Hold time.Duration
	Seed        uint64

	mu       sync.Mutex
	injected int
}

// Injected reports how many times the fault was injected.
func (n *Nemesis) Injected() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.injected
}

// Run implements history.Nemesis.
func (n *Nemesis) Run(ctx context.Context, faults *history.Faults) error {
	ttl := n.TTL
	if ttl == 0 {
		ttl = n.D.TTL
	}
	quiet, hold := n.Quiet, n.Hold
	if quiet == 0 {
		quiet = ttl / 2
	}
	if hold == 0 {
		hold = ttl * 3 / 2
	}
	if n.Fault.Hold != 0 {
		hold = n.Fault.Hold
	}
	rng := rand.New(rand.NewPCG(n.Seed, 0x6e656d))
	jit := func(d time.Duration) time.Duration { return d/2 + time.Duration(rng.Int64N(int64(d)+1)) }
	for {
		if !wait(ctx, jit(quiet)) {
			return nil
		}
		if err := n.once(ctx, faults, rng, jit(hold)); err != nil {
			return err
		}
	}
}

// once injects the fault, holds it, and heals it. A failure of testenv
// (reported through Fatalf) becomes the error; what was broken before it is
// healed all the same.
func (n *Nemesis) once(ctx context.Context, faults *history.Faults, rng *rand.Rand, hold time.Duration) (err error) {
	tb := &faultTB{TB: n.D.tb}
	h := &Harm{TB: tb, Rng: rng, D: n.D}
	end := faults.Begin(n.Fault.Name)
	start := time.Now()
	defer func() {
		// Heal in reverse order, each step on its own, so that a failed
		// step does not leave the others broken.
		if d := n.Fault.MinHold - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		for i := len(h.undos) - 1; i >= 0; i-- {
			if herr := tb.try(func() { retry(tb, h.undos[i]) }); herr != nil && err == nil {
				err = fmt.Errorf("healing %s: %w", n.Fault.Name, herr)
			}
		}
		end()
	}()
	if err := tb.try(func() { n.Fault.Inject(h) }); err != nil {
		return fmt.Errorf("injecting %s: %w", n.Fault.Name, err)
	}
	n.mu.Lock()
	n.injected++
	n.mu.Unlock()
	wait(ctx, hold)
	return nil
}

// wait sleeps d; false if ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// faultTB is the testing.TB testenv's fault controls report to from the
// nemesis's goroutine. The real t.Fatalf must not be called there (it would
// end the goroutine and leave the run waiting for the nemesis forever):
// Fatalf and friends panic instead, and try turns the panic into an error.
type faultTB struct {
	testing.TB
}

type tbFailure struct{ msg string }

func (f *faultTB) Fatalf(format string, args ...any) { panic(tbFailure{fmt.Sprintf(format, args...)}) }
func (f *faultTB) Fatal(args ...any)                 { panic(tbFailure{fmt.Sprint(args...)}) }
func (f *faultTB) Errorf(format string, args ...any) { panic(tbFailure{fmt.Sprintf(format, args...)}) }
func (f *faultTB) Error(args ...any)                 { panic(tbFailure{fmt.Sprint(args...)}) }
func (f *faultTB) FailNow()                          { panic(tbFailure{"FailNow"}) }
func (f *faultTB) Skipf(format string, args ...any) {
	panic(tbFailure{"skip: " + fmt.Sprintf(format, args...)})
}
func (f *faultTB) Skip(args ...any) { panic(tbFailure{"skip: " + fmt.Sprint(args...)}) }
func (f *faultTB) SkipNow()         { panic(tbFailure{"SkipNow"}) }

// Logf keeps testenv's progress lines (restart times) out of the test log
// unless -v is given: a soak restarts servers hundreds of times.
func (f *faultTB) Logf(format string, args ...any) {
	if testing.Verbose() {
		f.TB.Logf(format, args...)
	}
}

func (f *faultTB) Helper() {}

// try runs fn, turning a failure reported through f into an error.
func (f *faultTB) try(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			tf, ok := r.(tbFailure)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", tf.msg)
		}
	}()
	fn()
	return nil
}
