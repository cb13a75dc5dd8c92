//go:build unix

package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// failoverSettle is how long a new standby is given at least to open its
// backend and start campaigning before the leader is killed. A random share
// of a third of the TTL is added, so that kills fall at every moment
// between two of the leader's refreshes (made every third of the TTL):
// after a fixed wait they would all fall at one phase.
const failoverSettle = 1500 * time.Millisecond

// failoverResult is one backend's failover trials.
type failoverResult struct {
	name  string
	ttl   time.Duration
	times []time.Duration // kill → successor's command running, one per trial
	err   error
}

// benchFailover measures, for each backend, how long an election takes to
// replace a leader whose process is killed: candidates are "lockctl elect"
// child processes (this binary), each in a process group of its own, whose
// command prints its term; the leader's group is SIGKILLed (no resignation,
// no clean-up) and the time runs until the standby's command prints. Each
// trial starts a fresh standby, lets it campaign, then kills the leader.
func (a *app) benchFailover(ctx context.Context, backends []benchBackend, trials int, ttl time.Duration) int {
	exe, err := os.Executable()
	if err != nil {
		return a.failf(exitUnavailable, "bench: failover: %v", err)
	}
	var results []failoverResult
	for _, b := range backends {
		if strings.HasPrefix(b.url, "memory:") {
			fmt.Fprintf(a.stderr, "lockctl: bench: failover: %s skipped: in-process only, no leader process to kill\n", b.url)
			continue
		}
		// The child's arguments end with the URL.
		child := slices.Clone(b.child)
		child[len(child)-1] = failoverURL(child[len(child)-1], ttl)
		r := failoverResult{name: shortName(child[len(child)-1]), ttl: ttl}
		fmt.Fprintf(a.stderr, "lockctl: bench: failover: %s, %d trials, TTL %v\n", r.name, trials, ttl)
		r.times, r.err = failoverTrials(ctx, exe, child, trials, ttl, a.stderr)
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintf(a.stdout, "lockctl bench --failover: leader's process killed (SIGKILL) → the standby's command running; %d trials per backend\n\n", trials)
	fmt.Fprintln(a.stdout, "| backend | TTL | trials | p50 | max | min |")
	fmt.Fprintln(a.stdout, "|---|---:|---:|---:|---:|---:|")
	failed := false
	for _, r := range results {
		if r.err != nil {
			failed = true
			fmt.Fprintf(a.stderr, "lockctl: bench: failover: %s: %v\n", r.name, r.err)
		}
		if len(r.times) == 0 {
			fmt.Fprintf(a.stdout, "| %s | %v | 0 | – | – | – |\n", r.name, r.ttl)
			continue
		}
		s := slices.Clone(r.times)
		slices.Sort(s)
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		fmt.Fprintf(a.stdout, "| %s | %v | %d | %s | %s | %s |\n", r.name, r.ttl, len(s), ms(s[(len(s)-1)/2]), ms(s[len(s)-1]), ms(s[0]))
	}
	if failed {
		return exitUnavailable
	}
	return exitOK
}

// failoverURL gives a ZooKeeper URL a session timeout of ttl (its locks
// live as long as their session) unless it names one.
func failoverURL(raw string, ttl time.Duration) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "zookeeper" || u.Query().Has("session_timeout") {
		return raw
	}
	q := u.Query()
	q.Set("session_timeout", ttl.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// electChild is one "lockctl elect" child process.
type electChild struct {
	cmd   *exec.Cmd
	terms <-chan uint64 // each term its command starts in
	done  chan struct{} // closed when its output ends
}

// startElectChild starts "lockctl elect" on the backend that backend (flags,
// then the URL) names.
func startElectChild(exe string, backend []string, name string, ttl time.Duration, stderr io.Writer) (*electChild, error) {
	args := append([]string{"elect", "--ttl", ttl.String()}, backend...)
	args = append(args, name, "--", "sh", "-c", `echo "leading $LOCKER_TOKEN"; exec sleep 3600`)
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, killed whole
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	terms := make(chan uint64, 4)
	c := &electChild{cmd: cmd, terms: terms, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if t, ok := strings.CutPrefix(sc.Text(), "leading "); ok {
				n, _ := strconv.ParseUint(t, 10, 64)
				terms <- n
			}
		}
	}()
	return c, nil
}

// kill ends the electChild's whole process group at once and reaps it.
func (c *electChild) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
	_ = c.cmd.Wait()
}

// waitTerm waits for the electChild's command to start in a term.
func (c *electChild) waitTerm(ctx context.Context, within time.Duration) (uint64, error) {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case n := <-c.terms:
		return n, nil
	case <-c.done:
		return 0, fmt.Errorf("electChild exited: %v", c.cmd.Wait())
	case <-t.C:
		return 0, fmt.Errorf("no term within %v", within)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func failoverTrials(ctx context.Context, exe string, backend []string, trials int, ttl time.Duration, stderr io.Writer) ([]time.Duration, error) {
	var id [5]byte
	_, _ = crand.Read(id[:])
	name := "lockctl-bench-failover/" + hex.EncodeToString(id[:])
	bound := 10*ttl + 30*time.Second // far past any backend's stated bound: a hang, not a figure
	leader, err := startElectChild(exe, backend, name, ttl, stderr)
	if err != nil {
		return nil, err
	}
	defer func() { leader.kill() }()
	term, err := leader.waitTerm(ctx, bound)
	if err != nil {
		return nil, fmt.Errorf("first leader: %w", err)
	}
	var times []time.Duration
	for i := range trials {
		standby, err := startElectChild(exe, backend, name, ttl, stderr)
		if err != nil {
			return times, err
		}
		select {
		case n := <-standby.terms:
			standby.kill()
			return times, fmt.Errorf("trial %d: the standby led (term %d) while term %d's leader lived", i+1, n, term)
		case <-time.After(failoverSettle + rand.N(ttl/3)):
		case <-ctx.Done():
			standby.kill()
			return times, ctx.Err()
		}
		killed := time.Now()
		leader.kill()
		leader = standby
		next, err := leader.waitTerm(ctx, bound)
		if err != nil {
			return times, fmt.Errorf("trial %d: %w", i+1, err)
		}
		took := time.Since(killed)
		if next <= term {
			return times, fmt.Errorf("trial %d: term %d after term %d", i+1, next, term)
		}
		term = next
		times = append(times, took)
		fmt.Fprintf(stderr, "lockctl: bench: failover: trial %d: %v (term %d)\n", i+1, took.Round(time.Millisecond), term)
	}
	return times, nil
}
