//go:build unix

package procfault_test

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildHolder builds command holder into a directory of t's.
func buildHolder(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "holder")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/distlock/locker/internal/procfault/holder")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build holder: %v\n%s", err, out)
	}
	return bin
}

// A holder is one running holder process and the lines it printed.
type holder struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu     sync.Mutex
	lines  []string
	used   []bool
	notify chan struct{}
	eof    chan struct{}
}

// startHolder runs bin with args and waits for its "ready" line; the
// process is killed at t.Cleanup if still running.
func startHolder(t *testing.T, bin string, args ...string) *holder {
	t.Helper()
	h := &holder{t: t, cmd: exec.Command(bin, args...), notify: make(chan struct{}, 1), eof: make(chan struct{})}
	var stderr strings.Builder
	h.cmd.Stderr = &stderr
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.mu.Lock()
			h.lines = append(h.lines, sc.Text())
			h.used = append(h.used, false)
			h.mu.Unlock()
			select {
			case h.notify <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.eof
		_ = h.cmd.Wait()
		if t.Failed() {
			t.Logf("holder %s stderr:\n%s", strings.Join(args, " "), stderr.String())
		}
	})
	h.expect(30*time.Second, "ready")
	return h
}

func (h *holder) send(line string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.stdin, line); err != nil {
		h.t.Fatalf("holder: send %q: %v", line, err)
	}
}

// expect returns the first line not yet returned that starts with one of
// prefixes, waiting up to within; it fails the test with every line the
// holder printed if none comes.
func (h *holder) expect(within time.Duration, prefixes ...string) string {
	h.t.Helper()
	deadline := time.After(within)
	exited := false
	for {
		h.mu.Lock()
		for i, l := range h.lines {
			for _, p := range prefixes {
				if !h.used[i] && strings.HasPrefix(l, p) {
					h.used[i] = true
					h.mu.Unlock()
					return l
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-h.notify:
		case <-h.eof:
			if exited { // the lines are all in: look once more, then fail
				h.fail("holder exited before printing any of %q", prefixes)
			}
			exited = true
		case <-deadline:
			h.fail("holder printed none of %q within %v", prefixes, within)
		}
	}
}

func (h *holder) fail(format string, args ...any) {
	h.t.Helper()
	h.mu.Lock()
	lines := strings.Join(h.lines, "\n\t")
	h.mu.Unlock()
	h.t.Fatalf(format+"; it printed:\n\t%s", append(args, lines)...)
}

func (h *holder) signal(s syscall.Signal) {
	h.t.Helper()
	if err := h.cmd.Process.Signal(s); err != nil {
		h.t.Fatalf("holder: %v: %v", s, err)
	}
}

// exit asks the holder to close everything and waits for it to exit 0.
func (h *holder) exit() {
	h.t.Helper()
	h.send("exit")
	select {
	case <-h.eof:
	case <-time.After(30 * time.Second):
		h.fail("holder did not exit")
	}
	if err := h.cmd.Wait(); err != nil {
		h.fail("holder exited: %v", err)
	}
}

// granted parses a "granted TOKEN TTL_MS" line.
func (h *holder) granted(line string) (token uint64, ttl time.Duration) {
	h.t.Helper()
	var ms int64
	if _, err := fmt.Sscanf(line, "granted %d %d", &token, &ms); err != nil {
		h.fail("want a grant, got %q", line)
	}
	return token, time.Duration(ms) * time.Millisecond
}
