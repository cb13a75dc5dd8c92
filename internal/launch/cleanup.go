package launch

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// Labels put on every container and network this package makes, so that
// leftovers can be found and removed.
const (
	// LabelKey marks a container or network as made by this package.
	LabelKey = "org.distlock.locker.test"
	// labelPID holds the id of the process that made it, to tell live
	// processes' containers from leftovers of dead ones.
	labelPID = "org.distlock.locker.test.pid"
	// labelStart holds that process's start time, so a reused pid is not
	// mistaken for the process that made the container.
	labelStart = "org.distlock.locker.test.start"
)

func init() {
	// The watchdog is this same binary started again; it must do its job
	// before anything else runs.
	if parent := os.Getenv(watchdogEnv); parent != "" {
		runWatchdog(parent)
	}
}

// watchdogEnv names the variable that turns a re-executed binary into
// the watchdog of the process given in its value ("pid:start").
const watchdogEnv = "LOCKER_LAUNCH_WATCHDOG"

// self identifies this process in labels.
var self = struct{ pid, start string }{strconv.Itoa(os.Getpid()), procStart(os.Getpid())}

// labels returns the labels of a container or network made now.
func labels() map[string]string {
	return map[string]string{LabelKey: "1", labelPID: self.pid, labelStart: self.start}
}

// procStart returns the start time of process pid (clock ticks since boot,
// from /proc), or "" where there is no /proc: then pids alone tell processes
// apart.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; fields after it do not.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 19 {
			return f[19] // field 22 overall
		}
	}
	return ""
}

// alive reports whether the process a container's labels name still runs.
func alive(l map[string]string) bool {
	pid, err := strconv.Atoi(l[labelPID])
	if err != nil {
		return false
	}
	if !processExists(pid) {
		return false
	}
	if want := l[labelStart]; want != "" {
		if got := procStart(pid); got != "" && got != want {
			return false // the pid was reused
		}
	}
	return true
}

// removeLeftovers removes the containers and networks of processes
// that died without cleaning up (killed, timed out, crashed before their
// watchdog ran). Those of live processes — other test binaries or
// benchmark runs in parallel — are left alone.
func removeLeftovers(ctx context.Context, cli *client.Client) {
	removeLabelled(ctx, cli, func(l map[string]string) bool { return !alive(l) })
}

// removeLabelled force-removes every container, then network, whose
// labels match.
func removeLabelled(ctx context.Context, cli *client.Client, match func(map[string]string) bool) {
	f := make(client.Filters).Add("label", LabelKey)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err == nil {
		var wg sync.WaitGroup
		for _, c := range cs.Items {
			if match(c.Labels) {
				wg.Go(func() { removeContainer(ctx, cli, c.ID) })
			}
		}
		wg.Wait()
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err == nil {
		for _, n := range ns.Items {
			if match(n.Labels) {
				cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

// removeContainer removes a container whatever its state. A paused container
// is unpaused first: a frozen process cannot act on the kill.
func removeContainer(ctx context.Context, cli *client.Client, id string) error {
	cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	return err
}

var watchdogOnce sync.Once

// startWatchdog starts, once per process, a child that removes this
// process's containers and networks when this process dies without doing so
// itself. It notices the death as the end of its standard input, a pipe
// whose only writer is this process: the kernel closes it however the
// process ends, even by SIGKILL. It is what testcontainers' Ryuk does, without an image.
func startWatchdog() {
	watchdogOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			return
		}
		r, w, err := os.Pipe()
		if err != nil {
			return
		}
		cmd := newWatchdogCmd(exe)
		cmd.Env = append(os.Environ(), watchdogEnv+"="+self.pid+":"+self.start)
		cmd.Stdin = r
		// No stdout/stderr: `go test` waits for every writer of the test
		// binary's output to close, and the watchdog outlives the binary.
		if err := cmd.Start(); err != nil {
			r.Close()
			w.Close()
			return
		}
		r.Close()
		// w stays open for the life of the process, on purpose.
		watchdogPipe = w
		go cmd.Wait()
	})
}

// watchdogPipe keeps the write end of the watchdog's stdin reachable, so it
// is not closed by a finalizer.
var watchdogPipe *os.File

// runWatchdog is the watchdog's whole life: wait for the parent to die, then
// remove what it left.
func runWatchdog(parent string) {
	// Ctrl-C reaches the whole process group; the parent's cleanup may
	// still be running, and ours must run after it.
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	io.Copy(io.Discard, os.Stdin)
	pid, start, _ := strings.Cut(parent, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if cli, err := newClient(); err == nil {
		removeLabelled(ctx, cli, func(l map[string]string) bool {
			return l[labelPID] == pid && l[labelStart] == start
		})
	}
	os.Exit(0)
}
