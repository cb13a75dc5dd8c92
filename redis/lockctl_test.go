package redis_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// Two lockctl processes on one Redis: while the first holds the lock, the
// second's --try exits at once with the "locked" status (75).
func TestLockctl_SecondProcessTry_ExitsLocked(t *testing.T) {
	url := "redis://" + testenv.Redis(t).Addr() + "/0?prefix=" + testPrefix()
	bin := buildLockctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The first holds the lock until its stdin closes.
	first := exec.CommandContext(ctx, bin, "run", "--ttl", "5s", url, "job", "--", "sh", "-c", "echo held; cat >/dev/null")
	in, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	first.Stderr = os.Stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait()
	defer in.Close()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("first lockctl: %q, %v; want it to print held", line, err)
	}

	second := exec.CommandContext(ctx, bin, "run", "--try", url, "job", "--", "true")
	err = second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 75 {
		t.Fatalf("second lockctl --try while the first holds: %v, want exit status 75", err)
	}

	in.Close()
	if err := first.Wait(); err != nil {
		t.Fatalf("first lockctl: %v", err)
	}
	// Released: a third run takes the lock.
	if err := exec.CommandContext(ctx, bin, "run", "--try", url, "job", "--", "true").Run(); err != nil {
		t.Fatalf("lockctl --try after the first released: %v", err)
	}
}

// buildLockctl builds cmd/lockctl with this backend linked in: an overlay
// adds a blank import of package redis, so the test does not depend on which
// backends lockctl links by default.
func buildLockctl(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, err := filepath.Abs("../cmd/lockctl")
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "redis_backend.go")
	if err := os.WriteFile(extra, []byte("package main\n\nimport _ \"github.com/distlock/locker/redis\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(src, "zz_redis_backend_overlay.go"): extra}})
	ovf := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovf, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "lockctl")
	cmd := exec.Command("go", "build", "-overlay", ovf, "-o", bin, "../cmd/lockctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build lockctl: %v\n%s", err, out)
	}
	return bin
}

// go-redis logs through a process-wide logger of its own; lockctl's error
// for an unreachable Redis is still one line, its own.
func TestLockctl_UnreachableRedis_OneLineError(t *testing.T) {
	bin := buildLockctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "redis://"+closedAddr(t)+"/0", "job", "--", "true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 69 {
		t.Fatalf("lockctl run on an unreachable Redis: %v, want exit status 69", err)
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "lockctl: ") {
		t.Fatalf("lockctl wrote %d lines to stderr, want its own one:\n%s", len(lines), stderr.String())
	}
}
