package zookeeper

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// The server answers AUTHFAILED to credentials of a scheme it does not
// know (digest credentials are never refused: see the design), and both
// NOAUTH and AUTHFAILED become ErrUnauthorized keeping the message.
func TestUnauthorized_AuthFailedAndNoAuth(t *testing.T) {
	// A session first, of 15 s: with 2 s and no wait, a quiet fresh-clone
	// run on a loaded machine (2026-12-04) got zk.ErrNoServer from AddAuth,
	// go-zookeeper's connection attempt having timed out.
	conn, events, err := zk.Connect([]string{testenv.ZooKeeper(t).Addr()}, 15*time.Second, zk.WithLogInfo(false), zk.WithLogger(discard{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	refused := conn.AddAuth("no-such-scheme", []byte("x"))
	if !errors.Is(refused, zk.ErrAuthFailed) {
		t.Fatalf("AddAuth of an unknown scheme = %v, want zk.ErrAuthFailed", refused)
	}
	for _, err := range []error{refused, zk.ErrNoAuth} {
		got := unauthorized(err)
		if !errors.Is(got, locker.ErrUnauthorized) || !errors.Is(got, err) || errors.Is(got, locker.ErrUnavailable) {
			t.Errorf("unauthorized(%v) = %v, want ErrUnauthorized wrapping it", err, got)
		}
	}
	if err := unauthorized(zk.ErrConnectionClosed); errors.Is(err, locker.ErrUnauthorized) {
		t.Errorf("unauthorized(%v) = %v: an outage is no refusal", zk.ErrConnectionClosed, err)
	}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// A password in a log line of go-zookeeper is replaced.
func TestRedact(t *testing.T) {
	if got := redact("auth user:hunter2 failed", "hunter2"); got != "auth user:[redacted] failed" {
		t.Errorf("redact = %q", got)
	}
	if got := redact("line", ""); got != "line" {
		t.Errorf("redact without a secret = %q", got)
	}
}
