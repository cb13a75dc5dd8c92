// Command lockctl runs commands under a distributed lock and benchmarks the
// lock backends of package locker.
//
// Usage:
//
//	lockctl run [flags] URL KEY -- COMMAND [ARGS...]
//	lockctl elect [flags] URL NAME -- COMMAND [ARGS...]
//	lockctl elect --observe [--json] URL NAME
//	lockctl bench [--backend URL]... [flags]
//	lockctl inspect [--json] [--watch] URL KEY
//	lockctl list [--json] [--watch] URL [PREFIX]
//	lockctl help [COMMAND]
//
// The backend is chosen by URL (memory://, redis://…, etcd://…, zookeeper://…,
// postgres://…); see package locker for the URL forms. Flags of run may come
// anywhere before the "--" that precedes the command.
//
// # Credentials
//
// A backend's password comes from its URL (scheme://user:password@host…) or
// from --password-file FILE (the file's first line), which every subcommand
// that opens a backend takes; given both ways, lockctl refuses with a usage
// error rather than guess. Without either, it comes from the engine's own
// environment variable: REDISCLI_AUTH (redis, rediss, redlock), ETCDCTL_USER
// ("user:password", or the user with ETCDCTL_PASSWORD) and ETCDCTL_PASSWORD
// (etcd), PGPASSWORD, PGUSER and ~/.pgpass (postgres, read by pgx itself).
// ZooKeeper has none: user:password goes in the URL, or the password in a
// file. --password-file with a scheme that takes no password (memory://) is
// a usage error. No secret is ever needed on the command line, and lockctl
// prints none: URLs in its messages and reports are redacted, and the
// LOCKER_* variables of the command it runs carry no part of the URL but
// its scheme. The reasons are in docs/design/lockctl-credentials.md.
//
// # lockctl run
//
// Run acquires KEY, like flock(1) or "etcdctl lock", keeps the lease
// refreshed in the background, and runs COMMAND while holding it. The command
// inherits lockctl's standard streams and environment, plus:
//
//	LOCKER_KEY      the key
//	LOCKER_TOKEN    the fencing token of this hold, a decimal integer > 0;
//	                send it with every write to the protected resource
//	LOCKER_TTL      the lease TTL, as a Go duration (e.g. 15s)
//	LOCKER_BACKEND  the URL scheme of the backend (not the URL, which may
//	                hold a password)
//
// There is deliberately no deadline variable: the lease is refreshed while the
// command runs, so any deadline passed at start would be wrong a third of a
// TTL later. A command that must know whether it still holds the lock uses
// the token with a fencing guard instead.
//
// If the lease is lost while the command runs (a refresh failed, the backend
// reported the lock gone), lockctl sends the command SIGTERM, then SIGKILL
// after the grace period (--grace). SIGINT, SIGTERM and SIGHUP sent to lockctl
// are forwarded to the command; lockctl keeps the lock until the command has
// exited, then releases it. Only the command's own process is signalled, not
// its process group: it stays in lockctl's group so that it can use the
// terminal.
//
// # lockctl elect
//
// Elect is leader election for commands (package election), like "etcdctl
// elect" on every backend: it campaigns in the election NAME and runs
// COMMAND only while it leads, with the environment of run (LOCKER_KEY is
// NAME, LOCKER_TOKEN the term's fencing token). If leadership is lost, the
// command is stopped as run stops it (SIGTERM, SIGKILL after --grace) and
// lockctl campaigns again; when the command exits by itself, lockctl resigns
// and exits with its status, so a supervisor can restart it. --value
// publishes a value with the leadership, on backends that publish values.
// With --observe, lockctl prints the leader and every change of leader or
// value, one line each (JSON with --json), until interrupted.
//
// # lockctl bench
//
// Bench measures each backend given with --backend (memory:// by default; with
// --servers, Redis, Redlock over 5 masters, etcd, ZooKeeper and PostgreSQL
// started in Docker from the images of scripts/test-images, and removed
// afterwards) in one run, each workload interleaved across the backends (A B
// A B …, for --rounds rounds) so that drift on a shared machine hits all of
// them alike:
//
//   - flash sale: --stock units, --buyers concurrent buyers; each takes the
//     lock with locker.Do, reads the stock and decrements it if positive, every
//     access going through a fencing guard. A few holders (--pauses) stall past
//     their TTL, as in a GC pause, and try to write afterwards: the guard must
//     refuse them. An unlocked control run shows the overselling the lock
//     prevents.
//   - uncontended: --ops acquire+release pairs on one key from one goroutine
//     (latency p50, p90, p99, max, and operations per second).
//   - handoff: for each W in --waiters (1,8,32,128), W goroutines contend for
//     one key; handoffs per second and the latency from a release to the next
//     holder's grant.
//   - many keys: --many-workers workers over --many-keys keys.
//
// Beside each backend it measures the raw floor (--floor): the bare round
// trips its protocol needs for one acquire and one release, made with the
// engine's own client (Redis: 2 PINGs; etcd: a leased guarded txn put and a
// delete; ZooKeeper: create, getChildren, delete; PostgreSQL: 2 SELECT 1),
// and reports each figure as a ratio to it. It prints a table, with a
// progress bar on stderr when stderr is a terminal; --out DIR also writes
// report.md, results.json and charts (SVG and PNG). --quick is a smoke run of
// seconds. The comparison with the peer libraries (redsync, redislock,
// concurrency.Mutex, zk.Lock, pg_advisory_lock) is the bench module, in
// bench/ at the repository root, so that this module never depends on them.
//
// # lockctl inspect, lockctl list
//
// Inspect shows who holds KEY — owner label, fencing token, grant time, time
// left, waiters, as far as the backend records them — and exits 0 when it is
// held, 3 when it is free. List shows every lock held under PREFIX. Both
// print an aligned table, or JSON with --json; --watch redraws every second
// until interrupted, a live view of holders and waiters.
//
// # Exit status
//
// lockctl run exits with the command's status (128+N when the command was
// killed by signal N), or with one of its own:
//
//	64   usage: bad flags or arguments, a malformed URL or unknown scheme,
//	     an invalid key or TTL (sysexits EX_USAGE)
//	69   the backend could not be opened or failed (EX_UNAVAILABLE)
//	77   the backend refused the credentials, or the permission (EX_NOPERM)
//	75   the lock is held by another owner: --try found it held, or
//	     --timeout passed while waiting (EX_TEMPFAIL: try again later)
//	124  the lease was lost while the command ran; the command was stopped
//	     (as timeout(1) reports a command it stopped)
//	126  the command could not be executed
//	127  the command was not found
//	128+N  lockctl got signal N while waiting for the lock
//
// lockctl elect exits with the status of a command that exited by itself
// while leading, or with 64, 69, 77, 126, 127 or 128+N as run does (128+N: lockctl
// got signal N while campaigning); it never exits 124: leadership lost means
// campaigning again. --observe exits 0 when interrupted.
//
// lockctl bench exits 0 on success, 1 if a safety check failed (units
// oversold, or an update lost, with the lock), 64 on a usage error, 69 when
// a backend could not be opened or failed, 77 when it refused the
// credentials, and 128+N when stopped by signal N
// (the table then shows what was measured so far).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/distlock/locker"
)

// Exit statuses of lockctl itself; see the package documentation.
const (
	exitOK          = 0
	exitFailed      = 1   // bench: a safety check failed
	exitUsage       = 64  // EX_USAGE
	exitUnavailable = 69  // EX_UNAVAILABLE
	exitNoPerm      = 77  // EX_NOPERM: credentials or permissions refused
	exitLocked      = 75  // EX_TEMPFAIL
	exitLeaseLost   = 124 // as timeout(1)
	exitCannotExec  = 126 // as the shells
	exitNotFound    = 127 // as the shells
)

// app is what a subcommand may touch of the outside world, so that tests can
// run lockctl in-process with their own streams, signals and backends.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stderrIsTerminal decides whether bench draws a progress bar.
	stderrIsTerminal bool
	// signals delivers the signals lockctl should react to (forward, or stop).
	signals <-chan os.Signal
	// open opens a Locker from a URL; locker.Open outside tests.
	open func(ctx context.Context, url string, opts ...locker.Option) (locker.Locker, error)
}

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	a := &app{
		stdin:            os.Stdin,
		stdout:           os.Stdout,
		stderr:           os.Stderr,
		stderrIsTerminal: isTerminal(os.Stderr),
		signals:          sigs,
		open:             locker.Open,
	}
	os.Exit(a.main(context.Background(), os.Args[1:]))
}

// isTerminal reports whether f is a character device, which is what a
// terminal is; without golang.org/x/term this is the portable approximation
// (it also says yes for /dev/null, where a progress bar does no harm).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// main dispatches to a subcommand and returns the exit status.
func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return a.run(ctx, rest)
	case "elect":
		return a.elect(ctx, rest)
	case "bench":
		return a.bench(ctx, rest)
	case "inspect":
		return a.inspect(ctx, rest)
	case "list":
		return a.list(ctx, rest)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			switch rest[0] {
			case "run":
				return a.run(ctx, []string{"-h"})
			case "elect":
				return a.elect(ctx, []string{"-h"})
			case "bench":
				return a.bench(ctx, []string{"-h"})
			case "inspect":
				return a.inspect(ctx, []string{"-h"})
			case "list":
				return a.list(ctx, []string{"-h"})
			}
		}
		a.usage(a.stdout)
		return exitOK
	default:
		fmt.Fprintf(a.stderr, "lockctl: unknown command %q\n\n", cmd)
		a.usage(a.stderr)
		return exitUsage
	}
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `lockctl runs commands under a distributed lock and benchmarks lock backends.

Usage:
  lockctl run [flags] URL KEY -- COMMAND [ARGS...]
                      run COMMAND while holding the lock KEY on the backend at URL
  lockctl elect [flags] URL NAME -- COMMAND [ARGS...]
                      run COMMAND only while leading the election NAME
  lockctl elect --observe [--json] URL NAME
                      print each change of leader of NAME
  lockctl bench [--backend URL]... [flags]
                      benchmark backends (memory:// by default)
  lockctl inspect [--json] [--watch] URL KEY
                      show who holds KEY (exit 0 held, 3 free)
  lockctl list [--json] [--watch] URL [PREFIX]
                      list the locks held under PREFIX
  lockctl help COMMAND
                      show the flags of a command

`+credentialsHelp+`

Backends (by URL scheme): `+strings.Join(locker.Schemes(), ", ")+`
`)
}

// failf prints a message prefixed with "lockctl: " to stderr and returns code.
func (a *app) failf(code int, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "lockctl: "+format+"\n", args...)
	return code
}
