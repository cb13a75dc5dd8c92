// Package testimages names the container images the tests and benchmarks run
// their servers in, and builds them when they are missing.
//
// The images are built offline by scripts/test-images; each tag carries a
// hash of the files the image is built from, and the script prints the
// current tags with --print-tags. Both internal/testenv (tests) and
// benchkit/servers (lockctl bench --servers) ask for them here.
package testimages

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Environment variables that name other images instead of the script's.
const (
	ServerImageEnv = "LOCKER_TEST_SERVER_IMAGE"
	EtcdImageEnv   = "LOCKER_TEST_ETCD_IMAGE"
)

// Ensure returns the tags of the server and etcd images, running
// scripts/test-images to build them when Docker does not have them (a few
// minutes, once per machine; concurrent callers wait on the script's lock
// file). logf, if not nil, reports a build.
func Ensure(ctx context.Context, logf func(format string, args ...any)) (server, etcd string, err error) {
	server, etcd = os.Getenv(ServerImageEnv), os.Getenv(EtcdImageEnv)
	if server != "" && etcd != "" {
		return server, etcd, nil
	}
	script, err := findScript()
	if err != nil {
		return "", "", err
	}
	out, err := exec.CommandContext(ctx, script, "--print-tags").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --print-tags: %v", script, err)
	}
	tags := parseTags(out)
	if server == "" {
		server = tags["server"]
	}
	if etcd == "" {
		etcd = tags["etcd"]
	}
	if server == "" || etcd == "" {
		return "", "", fmt.Errorf("%s --print-tags printed no tags: %q", script, out)
	}
	if Have(ctx, server) && Have(ctx, etcd) {
		return server, etcd, nil
	}
	if logf != nil {
		logf("images %s / %s missing: running %s (a few minutes, once)", server, etcd, script)
	}
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("image %s or %s is missing and %s failed (%v); run scripts/test-images (as root, with access to a Debian mirror) and read its output:\n%s",
			server, etcd, script, err, tail(log.Bytes(), 3000))
	}
	if !Have(ctx, server) || !Have(ctx, etcd) {
		return "", "", fmt.Errorf("%s succeeded but image %s or %s is still missing; run scripts/test-images", script, server, etcd)
	}
	return server, etcd, nil
}

// Have reports whether Docker has the image tag.
func Have(ctx context.Context, tag string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", tag).Run() == nil
}

func parseTags(out []byte) map[string]string {
	tags := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			tags[k] = v
		}
	}
	return tags
}

// findScript finds scripts/test-images by walking up from the working
// directory: `go test` runs in the package's directory, and the bench module
// lives one level below the repository root.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "test-images")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/test-images not found in the working directory or above it: run from the locker repository, or set " + ServerImageEnv + " and " + EtcdImageEnv)
		}
		dir = parent
	}
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
