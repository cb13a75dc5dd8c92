package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/distlock/locker"
)

// releaseTimeout bounds the release after the command exited: past it the
// lock frees itself at the end of its TTL anyway.
const releaseTimeout = 5 * time.Second

// defaultGrace is how long a command gets between SIGTERM and SIGKILL once
// the lease is lost. Short, because by then another holder may be starting;
// the fencing token, not the grace period, is what protects the resource.
const defaultGrace = 5 * time.Second

// run implements "lockctl run".
func (a *app) run(ctx context.Context, args []string) int {
	fset := flag.NewFlagSet("run", flag.ContinueOnError)
	fset.SetOutput(a.stderr)
	ttl := fset.Duration("ttl", locker.DefaultTTL, "lease time to live; the lease is refreshed every third of it")
	try := fset.Bool("try", false, fmt.Sprintf("fail at once, with status %d, if the lock is held", exitLocked))
	timeout := fset.Duration("timeout", 0, fmt.Sprintf("give up waiting for the lock after this long, with status %d (0: wait for ever)", exitLocked))
	grace := fset.Duration("grace", defaultGrace, "after the lease is lost, time between SIGTERM and SIGKILL to the command")
	owner := fset.String("owner", defaultOwner(), "holder label, shown by backends that support inspection")
	passwordFile := passwordFileFlag(fset)
	minHold := fset.Duration("min-hold", 0, "keep the lock held on the server at least this long after the grant, even if COMMAND ends sooner (a job on every replica runs at most once per interval)")
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: lockctl run [flags] URL KEY -- COMMAND [ARGS...]

Runs COMMAND while holding the lock KEY on the backend at URL, refreshing the
lease; stops COMMAND if the lease is lost. COMMAND gets LOCKER_KEY,
LOCKER_TOKEN (the fencing token), LOCKER_TTL and LOCKER_BACKEND in its
environment. Exits with COMMAND's status, or 64 usage, 69 backend failure,
77 credentials refused, 75 lock held (--try, --timeout), 124 lease lost, 126/127 command not runnable.

Flags:
`)
		fset.PrintDefaults()
		fmt.Fprint(fset.Output(), "\n"+credentialsHelp)
	}
	pos, command, status, ok := parseRunArgs(fset, args)
	if !ok {
		return status
	}
	rawURL, key := pos[0], pos[1]
	rawURL, err := withCredentials(rawURL, *passwordFile)
	if err != nil {
		return a.failf(exitUsage, "run: %v", err)
	}
	switch {
	case len(command) == 0:
		return a.failf(exitUsage, "run: no command given (lockctl run URL KEY -- COMMAND [ARGS...])")
	case *ttl <= 0:
		return a.failf(exitUsage, "run: --ttl %v is not positive", *ttl)
	case *timeout < 0:
		return a.failf(exitUsage, "run: --timeout %v is negative", *timeout)
	case *grace < 0:
		return a.failf(exitUsage, "run: --grace %v is negative", *grace)
	case *minHold < 0:
		return a.failf(exitUsage, "run: --min-hold %v is negative", *minHold)
	case *try && *timeout > 0:
		return a.failf(exitUsage, "run: --try and --timeout exclude each other")
	}
	if err := locker.ValidateKey(key); err != nil {
		return a.failf(exitUsage, "run: key %q: %v", key, err)
	}

	// Find the command before taking the lock: a typo should not cost anyone
	// a lock.
	if err := exec.Command(command[0]).Err; err != nil {
		return a.failf(startStatus(err), "run: %v", err)
	}

	// While lockctl waits for the lock, a signal aborts the wait; once the
	// command runs, signals are forwarded to it instead.
	wctx, stopWatch := a.cancelOnSignal(ctx)
	l, err := a.open(wctx, rawURL)
	if err != nil {
		if sig := stopWatch(); sig != nil {
			return a.failf(signalStatus(sig), "run: interrupted by %v while opening the backend", sig)
		}
		return a.failf(lockStatus(err), "run: %v", err)
	}
	defer l.Close()

	opts := []locker.Option{locker.WithTTL(*ttl), locker.WithAutoRefresh(true), locker.WithOwner(*owner), locker.WithMinHold(*minHold)}
	var lease locker.Lease
	if *try {
		lease, err = l.TryAcquire(wctx, key, opts...)
	} else {
		actx, cancel := wctx, context.CancelFunc(func() {})
		if *timeout > 0 {
			actx, cancel = context.WithTimeout(wctx, *timeout)
		}
		lease, err = l.Acquire(actx, key, opts...)
		cancel()
	}
	sig := stopWatch()
	switch {
	case sig != nil:
		if err == nil {
			_ = a.release(ctx, lease, key)
		}
		return a.failf(signalStatus(sig), "run: interrupted by %v while waiting for %q", sig, key)
	case err == nil:
	case *timeout > 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return a.failf(exitLocked, "run: %q still held by another owner after %v", key, *timeout)
	default:
		return a.failf(lockStatus(err), "run: %v", err)
	}

	cmd, err := a.start(command, key, lease.Token(), *ttl, rawURL)
	if err != nil {
		_ = a.release(ctx, lease, key)
		return a.failf(startStatus(err), "run: %v", err)
	}

	lost := a.supervise(cmd, lease, fmt.Sprintf("run: lease on %q", key), *grace)
	if rerr := a.release(ctx, lease, key); lost == nil && errors.Is(rerr, locker.ErrLeaseLost) {
		lost = rerr
	}
	if lost != nil {
		return a.failf(exitLeaseLost, "run: lease on %q lost while the command ran (command %v): %v", key, cmd.ProcessState, lost)
	}
	return exitStatus(cmd.ProcessState)
}

// parseRunArgs splits "[flags] URL [flags] KEY [flags] [--] COMMAND [ARGS...]":
// flags may come anywhere before the command, which is everything after the
// "--" that follows KEY (or, without "--", from the first argument after KEY
// that is not a flag). The command's own flags are never parsed. When the
// arguments are not that (or ask for help), ok is false and status is the
// exit status, the usage already printed.
func parseRunArgs(fset *flag.FlagSet, args []string) (pos, command []string, status int, ok bool) {
	pos, command, err := splitRunArgs(fset, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, nil, exitOK, false
	case err != nil:
		return nil, nil, exitUsage, false
	case len(pos) < 2:
		fset.Usage()
		return nil, nil, exitUsage, false
	}
	return pos, command, 0, true
}

func splitRunArgs(fset *flag.FlagSet, args []string) (pos, command []string, err error) {
	for {
		if err := fset.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fset.Args()
		if len(pos) == 2 || len(args) == 0 {
			return pos, args, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
		if len(pos) == 2 && len(args) > 0 && args[0] == "--" {
			return pos, args[1:], nil
		}
	}
}

// start starts command with lockctl's standard streams and, in its
// environment, the lock's variables (see the package documentation).
func (a *app) start(command []string, key string, token uint64, ttl time.Duration, rawURL string) (*exec.Cmd, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = append(os.Environ(),
		"LOCKER_KEY="+key,
		"LOCKER_TOKEN="+strconv.FormatUint(token, 10),
		"LOCKER_TTL="+ttl.String(),
		"LOCKER_BACKEND="+scheme(rawURL),
	)
	// Only matters when a stream is not a file (tests): do not wait for ever
	// on a grandchild that keeps the pipe open after the command exited.
	cmd.WaitDelay = time.Second
	return cmd, cmd.Start()
}

// holding is what supervise watches: a lease, or an election's term.
type holding interface {
	Done() <-chan struct{}
	Err() error
}

// supervise waits for the started command to exit, forwarding signals to it
// and stopping it if the hold (what names it in messages) is lost. It
// returns the loss, if any.
func (a *app) supervise(cmd *exec.Cmd, lease holding, what string, grace time.Duration) (lost error) {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()
	leaseDone := lease.Done()
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			return lost
		case sig := <-a.signals:
			_ = cmd.Process.Signal(sig)
		case <-leaseDone:
			leaseDone = nil
			lost = lease.Err()
			if lost == nil { // cannot happen: Done closes only when Err is set
				lost = locker.ErrLeaseLost
			}
			fmt.Fprintf(a.stderr, "lockctl: %s lost (%v); sending SIGTERM to the command\n", what, lost)
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				// No SIGTERM on this platform, or already gone.
				_ = cmd.Process.Kill()
			}
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(a.stderr, "lockctl: %s: command still running %v after SIGTERM; sending SIGKILL\n", what, grace)
			_ = cmd.Process.Kill()
		}
	}
}

// release gives the lock up after the command, bounded by releaseTimeout and
// independent of ctx: the lock must be freed even when lockctl is stopping.
// A failure other than loss is reported, not fatal: the TTL frees the lock.
func (a *app) release(ctx context.Context, lease locker.Lease, key string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := lease.Release(rctx)
	if err != nil && !errors.Is(err, locker.ErrLeaseLost) {
		fmt.Fprintf(a.stderr, "lockctl: run: release %q: %v (the lock frees itself after its TTL)\n", key, err)
	}
	return err
}

// cancelOnSignal returns a context cancelled when a signal arrives, and a
// stop function that ends the watch and returns the signal, if one came.
// After stop returns, signals are left to the caller.
func (a *app) cancelOnSignal(ctx context.Context) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		got  os.Signal
		once sync.Once
	)
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case got = <-a.signals:
			cancel()
		case <-quit:
		}
	}()
	return ctx, func() os.Signal {
		once.Do(func() { close(quit) })
		<-done
		cancel()
		return got
	}
}

// lockStatus maps an error from Open, Acquire or TryAcquire to an exit status.
func lockStatus(err error) int {
	switch {
	case errors.Is(err, locker.ErrLocked):
		return exitLocked
	case errors.Is(err, locker.ErrUnauthorized):
		return exitNoPerm
	case errors.Is(err, locker.ErrInvalidURL),
		errors.Is(err, locker.ErrInvalidKey),
		errors.Is(err, locker.ErrInvalidOption):
		return exitUsage
	default:
		return exitUnavailable
	}
}

// startStatus maps a failure to start the command to the shells' statuses.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

// exitStatus is the command's status as a shell reports it: 128+N when the
// command was killed by signal N.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalStatus is the status of a process stopped by sig, as shells report it.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGINT)
}

// scheme returns the scheme of a URL that already opened, for LOCKER_BACKEND;
// the rest of the URL stays out of the environment because it may hold a
// password.
func scheme(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// defaultOwner labels the holder for inspection: who holds the lock, where.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("lockctl@%s pid %d", host, os.Getpid())
}
