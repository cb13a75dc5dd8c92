package launch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/launch"
)

// Ports are handed out once per process and from below the kernel's
// ephemeral range, where no outgoing connection takes them.
func TestFreePort_BelowEphemeralRangeNeverTwice(t *testing.T) {
	lo := 32768 // Linux's default start of the range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if lo, err = strconv.Atoi(strings.Fields(string(b))[0]); err != nil {
			t.Fatal(err)
		}
	}
	if launch.PortHigh > lo {
		t.Fatalf("ports up to %d reach into the ephemeral range (%d and up)", launch.PortHigh, lo)
	}
	seen := map[int]bool{}
	for range 200 {
		p, err := launch.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < launch.PortLow || p >= launch.PortHigh || seen[p] {
			t.Fatalf("port %d: outside [%d, %d) or handed out twice", p, launch.PortLow, launch.PortHigh)
		}
		seen[p] = true
	}
}

// A combined container runs every spec's command line, arguments intact,
// and lives as long as they do.
func TestCombine_RunsEachCommandWithItsArguments(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) launch.Spec {
		return launch.Spec{
			Kind: name, Image: "img",
			Entrypoint: []string{"sh", "-c", `sleep 0.2; printf %s "$1" >"$2"`, "sh"},
			Cmd:        []string{content, filepath.Join(dir, name)},
			Services:   []launch.Service{{Kind: name}},
		}
	}
	c := launch.Combine("both", write("a", "it's $HOME"), write("b", `"quoted" \ and ''`))
	if c.Image != "img" || len(c.Services) != 2 {
		t.Fatalf("image %q, %d services", c.Image, len(c.Services))
	}
	if out, err := exec.Command(c.Entrypoint[0], c.Entrypoint[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, want := range map[string]string{"a": "it's $HOME", "b": `"quoted" \ and ''`} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s wrote %q (%v), want %q", name, got, err, want)
		}
	}
}
