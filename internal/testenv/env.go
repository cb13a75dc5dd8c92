package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testimages"
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
	return testimages.Ensure(context.Background(), func(format string, args ...any) {
		t.Logf("testenv: "+format, args...)
	})
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
