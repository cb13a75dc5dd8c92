package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/election"
	"github.com/distlock/locker/internal/testenv"
)

// electTimeout bounds what a test waits for from lockctl elect.
const electTimeout = 60 * time.Second

// candidate returns an election on url as another process would campaign
// in it, closed when the test ends.
func candidate(t *testing.T, url, name, label string) *election.Election {
	t.Helper()
	l, err := locker.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	e, err := election.New(l, name, election.WithLabel(label))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// line waits for the next line the command or lockctl printed.
func line(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case l := <-got:
		return l
	case <-time.After(electTimeout):
		t.Fatalf("nothing printed within %v", electTimeout)
		return ""
	}
}

// exited waits for lockctl's status.
func exited(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(electTimeout):
		t.Fatalf("lockctl still running after %v", electTimeout)
		return 0
	}
}

// tokenOf parses the token in a line "started TOKEN".
func tokenOf(t *testing.T, l string) uint64 {
	t.Helper()
	f := strings.Fields(l)
	if len(f) != 2 || f[0] != "started" {
		t.Fatalf("command printed %q, want started TOKEN", l)
	}
	tok, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || tok == 0 {
		t.Fatalf("LOCKER_TOKEN=%q, want an integer > 0", f[1])
	}
	return tok
}

func TestElect_RunsCommandWhileLeading(t *testing.T) {
	needShell(t)
	a, stdout, stderr := testApp()
	url := "memory://" + t.Name()
	code := a.main(context.Background(), []string{"elect", url, "scheduler", "--", "sh", "-c", `echo "$LOCKER_TOKEN $LOCKER_KEY $LOCKER_BACKEND"; exit 3`})
	if code != 3 {
		t.Fatalf("exit %d, want the command's 3; stderr: %s", code, stderr)
	}
	f := strings.Fields(stdout.String())
	if len(f) != 3 || f[1] != "scheduler" || f[2] != "memory" {
		t.Fatalf("command printed %q, want TOKEN scheduler memory", stdout)
	}
	if tok, err := strconv.ParseUint(f[0], 10, 64); err != nil || tok == 0 {
		t.Errorf("LOCKER_TOKEN=%q, want an integer > 0", f[0])
	}
	assertFree(t, url, "scheduler") // resigned
}

// The command starts only once the other leader resigns, with a later term.
func TestElect_WaitsForTheLeader(t *testing.T) {
	needShell(t)
	url := "memory://" + t.Name()
	other := candidate(t, url, "scheduler", "other")
	term, err := other.Campaign(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	a, _, stderr := testApp()
	out, got := lines(t)
	a.stdout = out
	done := make(chan int, 1)
	go func() {
		done <- a.main(context.Background(), []string{"elect", url, "scheduler", "--", "sh", "-c", `echo "started $LOCKER_TOKEN"`})
	}()
	waitWaiters(t, url, "scheduler", 1)
	select {
	case l := <-got:
		t.Fatalf("the command printed %q while another candidate led", l)
	default:
	}
	if err := term.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tok := tokenOf(t, line(t, got)); tok <= term.Token() {
		t.Errorf("LOCKER_TOKEN %d after the other leader's %d", tok, term.Token())
	}
	if code := exited(t, done); code != exitOK {
		t.Errorf("exit %d, want 0; stderr: %s", code, stderr)
	}
}

// waitWaiters waits until n acquisitions queue for key on url.
func waitWaiters(t *testing.T, url, key string, n int) {
	t.Helper()
	l, err := locker.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	end := time.Now().Add(electTimeout)
	for {
		info, err := locker.Inspect(context.Background(), l, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d waiters for %q after %v, want %d", info.Waiters, key, electTimeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestElect_SignalWhileCampaigning(t *testing.T) {
	url := "memory://" + t.Name()
	if _, err := candidate(t, url, "scheduler", "other").Campaign(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	a, _, stderr := testApp()
	sigs := make(chan os.Signal, 1)
	a.signals = sigs
	done := make(chan int, 1)
	go func() { done <- a.main(context.Background(), []string{"elect", url, "scheduler", "--", "true"}) }()
	waitWaiters(t, url, "scheduler", 1)
	sigs <- syscall.SIGINT
	if code := exited(t, done); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d, want %d; stderr: %s", code, 128+int(syscall.SIGINT), stderr)
	}
	waitWaiters(t, url, "scheduler", 0) // the campaign left nothing behind
}

// A signal reaches the command while it leads; lockctl exits with the
// command's status and resigns.
func TestElect_ForwardsSignals(t *testing.T) {
	needShell(t)
	a, _, stderr := testApp()
	sigs := make(chan os.Signal, 1)
	a.signals = sigs
	out, got := lines(t)
	a.stdout = out
	url := "memory://" + t.Name()
	done := make(chan int, 1)
	go func() {
		done <- a.main(context.Background(), []string{"elect", url, "scheduler", "--",
			"sh", "-c", `trap 'exit 42' TERM; echo "started $LOCKER_TOKEN"; while :; do sleep 0.05; done`})
	}()
	tokenOf(t, line(t, got))
	sigs <- syscall.SIGTERM
	if code := exited(t, done); code != 42 {
		t.Errorf("exit %d, want the command's 42 after its TERM trap; stderr: %s", code, stderr)
	}
	assertFree(t, url, "scheduler")
}

// On a real Redis behind a proxy: the leader is cut off past its TTL, so it
// loses the lead; lockctl stops the command, campaigns again once the
// network heals, and runs the command again in a later term.
func TestElect_LeadershipLost_StopsCommandAndCampaignsAgain(t *testing.T) {
	needShell(t)
	proxy := testenv.Redis(t).Proxy(t)
	url := "redis://" + proxy.Addr() + "/0"
	name := "lockctl-elect/" + strconv.FormatInt(time.Now().UnixNano(), 36)
	a, _, stderr := testApp()
	sigs := make(chan os.Signal, 1)
	a.signals = sigs
	out, got := lines(t)
	a.stdout = out
	done := make(chan int, 1)
	go func() {
		done <- a.main(context.Background(), []string{"elect", "--ttl", "1s", "--grace", "100ms", url, name, "--",
			"sh", "-c", `echo "started $LOCKER_TOKEN"; exec sleep 60`})
	}()
	first := tokenOf(t, line(t, got))
	proxy.Blackhole(t)
	waitFor(t, stderr, "campaigning again")
	proxy.Heal(t)
	if next := tokenOf(t, line(t, got)); next <= first {
		t.Errorf("LOCKER_TOKEN %d in the term after %d", next, first)
	}
	sigs <- syscall.SIGTERM // forwarded: sleep dies of it
	if code := exited(t, done); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d; stderr: %s", code, 128+int(syscall.SIGTERM), stderr)
	}
	if !strings.Contains(stderr.String(), "SIGTERM") {
		t.Errorf("stderr does not say the command was stopped: %s", stderr)
	}
}

// waitFor waits until lockctl wrote want to buf.
func waitFor(t *testing.T, buf *syncBuffer, want string) {
	t.Helper()
	end := time.Now().Add(electTimeout)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(end) {
			t.Fatalf("lockctl did not say %q within %v: %s", want, electTimeout, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// --observe prints the leader, a proclaimed value and the next leader, one
// line each, and exits 0 when interrupted.
func TestElect_Observe(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", asJSON), func(t *testing.T) {
			url := "memory://elect-observe-" + strconv.FormatBool(asJSON)
			ctx := context.Background()
			a, _, stderr := testApp()
			sigs := make(chan os.Signal, 1)
			a.signals = sigs
			out, got := lines(t)
			a.stdout = out
			args := []string{"elect", "--observe", url, "scheduler"}
			if asJSON {
				args = []string{"elect", "--observe", "--json", url, "scheduler"}
			}
			done := make(chan int, 1)
			go func() { done <- a.main(ctx, args) }()

			first, err := candidate(t, url, "scheduler", "host-a").Campaign(ctx, "10.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			want := func(token uint64, label, value string) {
				t.Helper()
				l := line(t, got)
				if asJSON {
					var j leaderJSON
					if err := json.Unmarshal([]byte(l), &j); err != nil || j.Token != token || j.Label != label || j.Value != value || j.Since == nil {
						t.Fatalf("printed %q (%v), want token %d, label %s, value %s, a since", l, err, token, label, value)
					}
					return
				}
				prefix := fmt.Sprintf("term=%d leader=%q value=%q since=", token, label, value)
				if !strings.HasPrefix(l, prefix) {
					t.Fatalf("printed %q, want %s…", l, prefix)
				}
			}
			want(first.Token(), "host-a", "10.0.0.1")
			if err := first.Proclaim(ctx, "10.0.0.2"); err != nil {
				t.Fatal(err)
			}
			want(first.Token(), "host-a", "10.0.0.2")
			if err := first.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			next, err := candidate(t, url, "scheduler", "host-b").Campaign(ctx, "10.0.0.3")
			if err != nil {
				t.Fatal(err)
			}
			want(next.Token(), "host-b", "10.0.0.3")
			sigs <- syscall.SIGINT
			if code := exited(t, done); code != exitOK {
				t.Errorf("exit %d, want 0; stderr: %s", code, stderr)
			}
		})
	}
}

func TestElect_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"elect"}, exitUsage},
		{[]string{"elect", "memory://", "e"}, exitUsage},
		{[]string{"elect", "memory://", "e", "--"}, exitUsage},
		{[]string{"elect", "--observe", "memory://", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "--json", "memory://", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "--ttl", "0s", "memory://", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "--ttl", "1ms", "memory://", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "--grace", "-1s", "memory://", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "memory://", "", "--", "true"}, exitUsage},
		{[]string{"elect", "nosuch://h", "e", "--", "true"}, exitUsage},
		{[]string{"elect", "memory://", "e", "--", "no-such-command-lockctl"}, exitNotFound},
	} {
		a, _, stderr := testApp()
		if code := a.main(context.Background(), tc.args); code != tc.want {
			t.Errorf("%q: exit %d, want %d; stderr: %s", tc.args, code, tc.want, stderr)
		} else if stderr.Len() == 0 {
			t.Errorf("%q: exit %d without a message", tc.args, code)
		}
	}
}
