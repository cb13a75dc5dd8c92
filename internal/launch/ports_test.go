package launch_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/launch"
)

// holdPortsEnv makes the test binary, run by
// TestFreePort_NeverOneAnotherLiveProcessWasHanded, a process that takes
// that many ports, prints them and lives until its stdin closes.
const holdPortsEnv = "LOCKER_LAUNCH_TEST_HOLD_PORTS"

// Test packages run side by side as processes, each with its own FreePort:
// a port handed to one of them and not bound yet must not be handed to
// another. Another process holds 9,000 of the 12,000 ports; 200 more taken
// here would all but surely meet one of them if nothing kept them apart.
func TestFreePort_NeverOneAnotherLiveProcessWasHanded(t *testing.T) {
	if s := os.Getenv(holdPortsEnv); s != "" {
		holdPorts(t, s)
		return
	}
	const held, taken = 9000, 200
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePort_NeverOneAnotherLiveProcessWasHanded$")
	cmd.Env = append(os.Environ(), holdPortsEnv+"="+strconv.Itoa(held))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the process holding ports: %v", err)
	}
	theirs := map[int]bool{}
	for _, f := range strings.Fields(line) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("the process holding ports printed %q", line)
		}
		theirs[p] = true
	}
	if len(theirs) != held {
		t.Fatalf("the process holding ports took %d, want %d", len(theirs), held)
	}
	var both []int
	for range taken {
		p, err := launch.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if theirs[p] {
			both = append(both, p)
		}
	}
	if len(both) > 0 {
		t.Fatalf("%d of %d ports handed out here were handed to another live process: %v", len(both), taken, both)
	}
}

// holdPorts is the other process: it takes n ports, prints them on one line
// and returns when its stdin closes.
func holdPorts(t *testing.T, n string) {
	count, err := strconv.Atoi(n)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := launch.FreePorts(count)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(strconv.Itoa(p) + " ")
	}
	os.Stdout.WriteString(b.String() + "\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}
