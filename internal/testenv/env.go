package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Labels put on every container and network testenv makes, so that leftovers
// can be found and removed.
const (
	// LabelKey marks a container or network as made by testenv.
	LabelKey = "org.distlock.locker.test"
	// labelPID holds the id of the process that made it, to tell live test
	// processes' containers from leftovers of dead ones.
	labelPID = "org.distlock.locker.test.pid"
	// labelStart holds that process's start time, so a reused pid is not
	// mistaken for the process that made the container.
	labelStart = "org.distlock.locker.test.start"
)

func init() {
	// The watchdog is this same test binary started again; it must do its
	// job before any test runs.
	if session := os.Getenv(watchdogEnv); session != "" {
		runWatchdog(session)
	}
	// testcontainers logs five lines per container to stdout; testenv logs
	// what matters (start times, addresses) through t.Logf instead.
	if os.Getenv("LOCKER_TESTENV_VERBOSE") == "" {
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	// The reaper's image cannot be pulled: cleanup is ours.
	setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true")
	// Our machines have /.dockerenv, so testcontainers believes it runs in a
	// container and dials the bridge gateway instead of the published
	// ports. Ports are published on 127.0.0.1, which is right for a local
	// engine (the only kind that can reach them anyway).
	if h := os.Getenv("DOCKER_HOST"); h == "" || strings.HasPrefix(h, "unix://") {
		setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
}

func setDefaultEnv(k, v string) {
	if _, ok := os.LookupEnv(k); !ok {
		os.Setenv(k, v)
	}
}

// inCI reports whether a missing backend must fail rather than skip.
func inCI() bool { return os.Getenv("CI") != "" }

// unavailable skips t, or fails it in CI, explaining why the server it needs
// is not there.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "testenv: " + fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatal(msg + " (CI is set: a missing backend fails the test instead of skipping it)")
	}
	t.Skip(msg)
}

// howToRun is appended to skip messages.
const howToRun = "run the tests on a machine with Docker (as root, `scripts/test-images` builds the images, which go test also does on first use), or point them at a running server with %s"

var (
	dockerOnce sync.Once
	dockerCli  *testcontainers.DockerClient
	dockerErr  error
)

// docker returns a client of the Docker engine, or why there is none. The
// first call also removes leftovers of earlier, dead test processes.
func docker() (*testcontainers.DockerClient, error) {
	dockerOnce.Do(func() {
		if os.Getenv("LOCKER_TEST_NO_DOCKER") != "" {
			dockerErr = errors.New("LOCKER_TEST_NO_DOCKER is set")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			dockerErr = err
			return
		}
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			cli.Close()
			dockerErr = err
			return
		}
		dockerCli = cli
		removeLeftovers(ctx, cli)
	})
	return dockerCli, dockerErr
}

// needDocker returns the Docker client or skips/fails t.
func needDocker(t testing.TB, envVar string) *testcontainers.DockerClient {
	t.Helper()
	cli, err := docker()
	if err != nil {
		unavailable(t, "no Docker engine (%v); "+howToRun, err, envVar)
	}
	return cli
}

// Image tags, from scripts/test-images.
var (
	imagesMu    sync.Mutex
	imagesDone  bool
	serverImage string
	etcdImage   string
	imagesErr   error
)

// findImagesOnce returns the tags of the server and etcd images, building
// them with scripts/test-images if they are missing. Docker must be available.
func findImagesOnce(t testing.TB) (server, etcd string) {
	t.Helper()
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if !imagesDone {
		serverImage, etcdImage, imagesErr = findImages(t)
		imagesDone = true
	}
	if imagesErr != nil {
		t.Fatalf("testenv: %v", imagesErr)
	}
	return serverImage, etcdImage
}

func findImages(t testing.TB) (server, etcd string, err error) {
	server, etcd = os.Getenv("LOCKER_TEST_SERVER_IMAGE"), os.Getenv("LOCKER_TEST_ETCD_IMAGE")
	if server != "" && etcd != "" {
		return server, etcd, nil
	}
	script, err := findScript()
	if err != nil {
		return "", "", err
	}
	out, err := exec.Command(script, "--print-tags").Output()
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
	cli, _ := docker()
	ctx := context.Background()
	if haveImage(ctx, cli, server) && haveImage(ctx, cli, etcd) {
		return server, etcd, nil
	}
	// First use on this machine: build. Concurrent test binaries wait for one
	// another on the script's lock file.
	t.Logf("testenv: images %s / %s missing: running %s (a few minutes, once)", server, etcd, script)
	start := time.Now()
	var log bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("image %s or %s is missing and %s failed (%v); run scripts/test-images (as root, with network access to a Debian mirror) and read its output:\n%s",
			server, etcd, script, err, tail(log.Bytes(), 3000))
	}
	t.Logf("testenv: images built in %v", time.Since(start).Round(time.Second))
	if !haveImage(ctx, cli, server) || !haveImage(ctx, cli, etcd) {
		return "", "", fmt.Errorf("%s succeeded but image %s or %s is still missing; run scripts/test-images", script, server, etcd)
	}
	return server, etcd, nil
}

func haveImage(ctx context.Context, cli *testcontainers.DockerClient, tag string) bool {
	_, err := cli.ImageInspect(ctx, tag)
	return err == nil
}

func parseTags(out []byte) map[string]string {
	tags := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			tags[k] = v
		}
	}
	return tags
}

// findScript finds scripts/test-images by walking up from the working
// directory, which `go test` sets to the package under test: any package of
// this module finds the module root that way.
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
			return "", errors.New("scripts/test-images not found above the working directory; set LOCKER_TEST_SERVER_IMAGE and LOCKER_TEST_ETCD_IMAGE")
		}
		dir = parent
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// randomID returns n random bytes in hex, for names that must not collide
// between tests and test processes.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
