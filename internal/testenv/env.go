package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testimages"
)

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

// docker returns the Docker engine, or why there is none. The first call
// also removes leftovers of earlier, dead processes.
func docker() (*launch.Docker, error) {
	if os.Getenv("LOCKER_TEST_NO_DOCKER") != "" {
		return nil, errors.New("LOCKER_TEST_NO_DOCKER is set")
	}
	return launch.Connect(context.Background())
}

// needDocker returns the Docker client or skips/fails t.
func needDocker(t testing.TB, envVar string) *launch.Docker {
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
