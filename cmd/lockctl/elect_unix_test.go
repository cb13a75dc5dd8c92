//go:build unix

package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// TestBinary_Elect_LeaderKilled_OtherTakesOver runs two lockctl elect
// processes on a real Redis and kills the leader's whole process group
// (SIGKILL, no resignation): the other candidate's command starts, with a
// larger token, once the dead leader's TTL has run out.
func TestBinary_Elect_LeaderKilled_OtherTakesOver(t *testing.T) {
	needShell(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "lockctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := "redis://" + testenv.Redis(t).Addr() + "/0"
	name := "lockctl-elect/" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const ttl = 2 * time.Second
	candidate := func() (*exec.Cmd, <-chan string) {
		cmd := exec.Command(bin, "elect", "--ttl", ttl.String(), url, name, "--", "sh", "-c", `echo "started $LOCKER_TOKEN"; exec sleep 60`)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, killed whole
		out, got := lines(t)
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
		return cmd, got
	}
	leader, got1 := candidate()
	first := tokenOf(t, line(t, got1))
	_, got2 := candidate()
	select {
	case l := <-got2:
		t.Fatalf("the second candidate's command printed %q while the first led", l)
	case <-time.After(ttl):
	}
	if err := syscall.Kill(-leader.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	next := tokenOf(t, line(t, got2))
	t.Logf("the other candidate's command started %v after the leader was killed (TTL %v)", time.Since(killed).Round(time.Millisecond), ttl)
	if next <= first {
		t.Errorf("LOCKER_TOKEN %d after the killed leader's %d", next, first)
	}
}
