package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/election"
)

// elect implements "lockctl elect".
func (a *app) elect(ctx context.Context, args []string) int {
	fset := flag.NewFlagSet("elect", flag.ContinueOnError)
	fset.SetOutput(a.stderr)
	value := fset.String("value", "", "value to publish while leading (backends that publish values)")
	ttl := fset.Duration("ttl", locker.DefaultTTL, "TTL of the leadership's lease; a crashed leader is replaced after about this long")
	grace := fset.Duration("grace", defaultGrace, "after leadership is lost, time between SIGTERM and SIGKILL to the command")
	label := fset.String("label", defaultOwner(), "candidate label, shown to observers")
	passwordFile := passwordFileFlag(fset)
	observe := fset.Bool("observe", false, "print each change of leader instead of campaigning")
	asJSON := fset.Bool("json", false, "with --observe: print one JSON object per change")
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: lockctl elect [flags] URL NAME -- COMMAND [ARGS...]
       lockctl elect --observe [--json] URL NAME

Campaigns in the election NAME on the backend at URL and runs COMMAND while
leading, with LOCKER_TOKEN (the term's fencing token), LOCKER_KEY (NAME),
LOCKER_TTL and LOCKER_BACKEND in its environment. If leadership is lost,
COMMAND is stopped (SIGTERM, then SIGKILL after --grace) and lockctl
campaigns again. When COMMAND exits by itself, lockctl resigns and exits with
its status. With --observe, prints the leader and each change of leader or
of its value, one line each, until interrupted.

Flags:
`)
		fset.PrintDefaults()
		fmt.Fprint(fset.Output(), "\n"+credentialsHelp)
	}
	pos, command, status, ok := parseRunArgs(fset, args)
	if !ok {
		return status
	}
	rawURL, name := pos[0], pos[1]
	rawURL, err := withCredentials(rawURL, *passwordFile)
	if err != nil {
		return a.failf(exitUsage, "elect: %v", err)
	}
	switch {
	case *observe && len(command) > 0:
		return a.failf(exitUsage, "elect: --observe takes no command")
	case !*observe && len(command) == 0:
		return a.failf(exitUsage, "elect: no command given (lockctl elect URL NAME -- COMMAND [ARGS...])")
	case *asJSON && !*observe:
		return a.failf(exitUsage, "elect: --json goes with --observe")
	case *ttl <= 0:
		return a.failf(exitUsage, "elect: --ttl %v is not positive", *ttl)
	case *grace < 0:
		return a.failf(exitUsage, "elect: --grace %v is negative", *grace)
	}
	if err := locker.ValidateKey(name); err != nil {
		return a.failf(exitUsage, "elect: name %q: %v", name, err)
	}
	if !*observe {
		if err := exec.Command(command[0]).Err; err != nil {
			return a.failf(startStatus(err), "elect: %v", err)
		}
	}

	wctx, stopWatch := a.cancelOnSignal(ctx)
	l, err := a.open(wctx, rawURL)
	if sig := stopWatch(); sig != nil {
		if err == nil {
			_ = l.Close()
		}
		return a.failf(signalStatus(sig), "elect: interrupted by %v while opening the backend", sig)
	}
	if err != nil {
		return a.failf(lockStatus(err), "elect: %v", err)
	}
	defer l.Close()
	e, err := election.New(l, name, election.WithTTL(*ttl), election.WithLabel(*label), election.WithLogger(a.logger()))
	if err != nil {
		return a.failf(lockStatus(err), "elect: %v", err)
	}
	if *observe {
		return a.observe(ctx, l, e, *asJSON)
	}
	return a.lead(ctx, e, *value, command, *ttl, *grace, rawURL)
}

// logger reports what an election does in the background on stderr.
func (a *app) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, at slog.Attr) slog.Attr {
			if len(groups) == 0 && at.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return at
		},
	}))
}

// lead runs command in every term this candidate wins, until it exits by
// itself or lockctl is interrupted.
func (a *app) lead(ctx context.Context, e *election.Election, value string, command []string, ttl, grace time.Duration, rawURL string) int {
	// A signal stops lockctl while it campaigns; while the command runs, it
	// is forwarded to the command (by supervise), whose exit then ends
	// lockctl.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		running atomic.Bool
		mu      sync.Mutex
		got     os.Signal
		wg      sync.WaitGroup
	)
	fwd := make(chan os.Signal, 1)
	sub := *a
	sub.signals = fwd
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case sig := <-a.signals:
				if running.Load() {
					select {
					case fwd <- sig:
					default:
					}
					continue
				}
				mu.Lock()
				got = sig
				mu.Unlock()
				cancel()
			case <-rctx.Done():
				return
			}
		}
	}()

	// The command's end, or its failure to start, ends lockctl: fn cancels
	// Run's context, so that a term lost at the same moment does not make
	// Run campaign again.
	var (
		finished bool
		status   int
		startErr error
	)
	err := election.Run(rctx, e, value, func(tctx context.Context, t *election.Term) error {
		if err := tctx.Err(); err != nil {
			return err
		}
		running.Store(true)
		defer running.Store(false)
		cmd, err := sub.start(command, e.Name(), t.Token(), ttl, rawURL)
		if err != nil {
			finished, status, startErr = true, startStatus(err), err
			cancel()
			return err
		}
		what := fmt.Sprintf("elect: leadership of %q (term %d)", e.Name(), t.Token())
		if lost := sub.supervise(cmd, t, what, grace); lost != nil {
			fmt.Fprintf(a.stderr, "lockctl: elect: command stopped (%v)\n", cmd.ProcessState)
			return lost
		}
		finished, status = true, exitStatus(cmd.ProcessState)
		cancel()
		return nil
	})
	cancel()
	wg.Wait()
	mu.Lock()
	sig := got
	mu.Unlock()
	switch {
	case startErr != nil:
		return a.failf(status, "elect: %v", startErr)
	case finished:
		return status
	case sig != nil:
		return a.failf(signalStatus(sig), "elect: interrupted by %v while campaigning for %q", sig, e.Name())
	case ctx.Err() != nil:
		return exitOK
	default:
		return a.failf(lockStatus(err), "elect: %v", err)
	}
}

// leaderJSON is a leader as elect --observe --json prints it.
type leaderJSON struct {
	Token uint64     `json:"token"`
	Label string     `json:"label"`
	Value string     `json:"value"`
	Since *time.Time `json:"since,omitempty"`
}

// observe prints the leader and each change, until lockctl is interrupted
// (status 0) or watching fails for good.
func (a *app) observe(ctx context.Context, l locker.Locker, e *election.Election, asJSON bool) int {
	// Observe ends quietly on a backend that cannot watch; ask once, to say so.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	for _, err := range locker.Watch(pctx, l, e.Name()) {
		if err != nil && pctx.Err() == nil {
			cancel()
			return a.failf(inspectStatus(err), "elect: observe: %v", err)
		}
		break
	}
	cancel()

	octx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-a.signals:
			stop()
		case <-octx.Done():
		}
	}()
	enc := json.NewEncoder(a.stdout)
	for ld := range e.Observe(octx) {
		var since *time.Time
		if !ld.Since.IsZero() {
			since = &ld.Since
		}
		if asJSON {
			_ = enc.Encode(leaderJSON{Token: ld.Token, Label: ld.Label, Value: ld.Value, Since: since})
			continue
		}
		fmt.Fprintf(a.stdout, "term=%d leader=%q value=%q", ld.Token, ld.Label, ld.Value)
		if since != nil {
			fmt.Fprintf(a.stdout, " since=%s", since.UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintln(a.stdout)
	}
	if octx.Err() != nil {
		return exitOK
	}
	return a.failf(exitUnavailable, "elect: observe %q: the backend stopped answering watches", e.Name())
}
