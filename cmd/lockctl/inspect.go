package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/distlock/locker"
)

// exitFree is lockctl inspect's status for a key nobody holds, so that a
// shell script can test it (0 held, 3 free).
const exitFree = 3

// watchEvery is how often --watch redraws.
const watchEvery = time.Second

// lockJSON is a lock as --json prints it.
type lockJSON struct {
	Key     string     `json:"key"`
	Held    bool       `json:"held"`
	Owner   string     `json:"owner,omitempty"`
	Token   uint64     `json:"token,omitempty"`
	Granted *time.Time `json:"granted,omitempty"`
	TTL     *float64   `json:"ttl_seconds,omitempty"`
	Waiters *int       `json:"waiters,omitempty"`
}

func toJSON(i locker.LockInfo) lockJSON {
	j := lockJSON{Key: i.Key, Held: i.Held, Owner: i.Owner, Token: i.Token}
	if !i.Granted.IsZero() {
		j.Granted = &i.Granted
	}
	if i.Held && i.TTL >= 0 {
		s := i.TTL.Seconds()
		j.TTL = &s
	}
	if i.Waiters >= 0 {
		j.Waiters = &i.Waiters
	}
	return j
}

// inspectArgs are the arguments and flags inspect and list share.
type inspectArgs struct {
	pos          []string
	asJSON       bool
	watch        bool
	passwordFile string
}

// inspectFlags parses the flags inspect and list share; status is -1 when
// the command should go on.
func (a *app) inspectFlags(name, usage string, args []string) (ia inspectArgs, status int) {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	fset.SetOutput(a.stderr)
	fset.BoolVar(&ia.asJSON, "json", false, "print JSON (with --watch, one document per redraw)")
	fset.BoolVar(&ia.watch, "watch", false, "redraw every second until interrupted, like watch(1)")
	pf := passwordFileFlag(fset)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), usage+"\nFlags:\n")
		fset.PrintDefaults()
		fmt.Fprint(fset.Output(), "\n"+credentialsHelp)
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ia, exitOK
		}
		return ia, exitUsage
	}
	ia.pos, ia.passwordFile = fset.Args(), *pf
	return ia, -1
}

// inspect: lockctl inspect [--json] [--watch] URL KEY.
func (a *app) inspect(ctx context.Context, args []string) int {
	ia, status := a.inspectFlags("inspect", `Usage: lockctl inspect [flags] URL KEY

Shows who holds KEY on the backend at URL: the holder's owner label, its
fencing token, when it was granted, the time left and the waiters, as far as
the backend records them. Exits 0 when KEY is held, 3 when it is free,
64 usage, 69 backend failure (or a backend without inspection), 77
credentials refused.
`, args)
	if status >= 0 {
		return status
	}
	pos, asJSON := ia.pos, ia.asJSON
	if len(pos) != 2 {
		return a.failf(exitUsage, "inspect: want URL KEY (lockctl inspect [--json] [--watch] URL KEY)")
	}
	return a.watching(ctx, "inspect", ia, func(ctx context.Context, l locker.Locker, w io.Writer) (int, error) {
		info, err := locker.Inspect(ctx, l, pos[1])
		if err != nil {
			return 0, err
		}
		if asJSON {
			err = json.NewEncoder(w).Encode(toJSON(info))
		} else {
			err = table(w, []locker.LockInfo{info})
		}
		if !info.Held {
			return exitFree, err
		}
		return exitOK, err
	})
}

// list: lockctl list [--json] [--watch] URL [PREFIX].
func (a *app) list(ctx context.Context, args []string) int {
	ia, status := a.inspectFlags("list", `Usage: lockctl list [flags] URL [PREFIX]

Lists the locks held on the backend at URL whose keys start with PREFIX
(all of them without one), with owner, token, grant time, time left and
waiters. Exits 0, or 64 usage, 69 backend failure (or a backend without
inspection), 77 credentials refused.
`, args)
	if status >= 0 {
		return status
	}
	pos, asJSON := ia.pos, ia.asJSON
	if len(pos) < 1 || len(pos) > 2 {
		return a.failf(exitUsage, "list: want URL [PREFIX] (lockctl list [--json] [--watch] URL [PREFIX])")
	}
	prefix := ""
	if len(pos) == 2 {
		prefix = pos[1]
	}
	return a.watching(ctx, "list", ia, func(ctx context.Context, l locker.Locker, w io.Writer) (int, error) {
		var locks []locker.LockInfo
		for info, err := range locker.List(ctx, l, prefix) {
			if err != nil {
				return 0, err
			}
			locks = append(locks, info)
		}
		if asJSON {
			out := make([]lockJSON, len(locks))
			for i, info := range locks {
				out[i] = toJSON(info)
			}
			return exitOK, json.NewEncoder(w).Encode(out)
		}
		return exitOK, table(w, locks)
	})
}

// watching opens the backend at ia.pos[0] and shows what show prints: once,
// or, with ia.watch, every second until lockctl is interrupted (status 0).
func (a *app) watching(ctx context.Context, cmd string, ia inspectArgs,
	show func(context.Context, locker.Locker, io.Writer) (int, error)) int {
	rawURL, err := withCredentials(ia.pos[0], ia.passwordFile)
	if err != nil {
		return a.failf(exitUsage, "%s: %v", cmd, err)
	}
	watch := ia.watch
	l, err := a.open(ctx, rawURL)
	if err != nil {
		return a.failf(lockStatus(err), "%s: %v", cmd, err)
	}
	defer l.Close()
	for {
		if watch {
			fmt.Fprint(a.stdout, "\x1b[H\x1b[2J") // home and clear, as watch(1)
			fmt.Fprintf(a.stdout, "Every %v: lockctl %s — %s\n\n", watchEvery, cmd, time.Now().Format(time.TimeOnly))
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, err := show(sctx, l, a.stdout)
		cancel()
		if err != nil {
			return a.failf(inspectStatus(err), "%s: %v", cmd, err)
		}
		if !watch {
			return status
		}
		select {
		case <-a.signals:
			return exitOK
		case <-ctx.Done():
			return exitOK
		case <-time.After(watchEvery):
		}
	}
}

// inspectStatus maps an inspection failure to a status: a backend without
// the ability is as good as unavailable for it.
func inspectStatus(err error) int {
	if errors.Is(err, locker.ErrUnsupported) {
		return exitUnavailable
	}
	return lockStatus(err)
}

// table prints locks as aligned columns.
func table(w io.Writer, locks []locker.LockInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tOWNER\tTOKEN\tGRANTED\tTTL\tWAITERS")
	for _, i := range locks {
		state, owner, token, granted, ttl, waiters := "free", "-", "-", "-", "-", "-"
		if i.Held {
			state, owner, token = "held", i.Owner, fmt.Sprint(i.Token)
			if owner == "" {
				owner = "-"
			}
			if !i.Granted.IsZero() {
				granted = i.Granted.Local().Format(time.DateTime)
			}
			if i.TTL >= 0 {
				ttl = i.TTL.Round(time.Millisecond).String()
			}
		}
		if i.Waiters >= 0 {
			waiters = fmt.Sprint(i.Waiters)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i.Key, state, owner, token, granted, ttl, waiters)
	}
	return tw.Flush()
}
