package etcd_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/etcd"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestNew_BadOptions_ErrInvalidOption(t *testing.T) {
	cli := newHarness("127.0.0.1:1").newClient(t)
	for name, opts := range map[string][]locker.Option{
		"NUL in the prefix":        {etcd.WithPrefix("a\x00b")},
		"zero request timeout":     {etcd.WithRequestTimeout(0)},
		"negative request timeout": {etcd.WithRequestTimeout(-time.Second)},
	} {
		if l, err := etcd.New(cli, opts...); !errors.Is(err, locker.ErrInvalidOption) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := etcd.New(nil); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("New(nil) = %v, want ErrInvalidOption", err)
	}
	if _, err := etcd.NewGuard(cli, etcd.WithGuardPrefix("a\x00")); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("NewGuard with NUL in the prefix = %v, want ErrInvalidOption", err)
	}
	if _, err := etcd.NewGuard(nil); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("NewGuard(nil) = %v, want ErrInvalidOption", err)
	}
}

// TestEtcd_GrantedTTL_WholeSeconds: etcd leases live whole seconds, and a
// lease says what it was really granted.
func TestEtcd_GrantedTTL_WholeSeconds(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	l := mustLocker(t, h, nil)
	for asked, want := range map[time.Duration]time.Duration{
		1500 * time.Millisecond: 2 * time.Second,
		10 * time.Millisecond:   time.Second,
		3 * time.Second:         3 * time.Second,
	} {
		lease, err := l.TryAcquire(ctxFor(t, 10*time.Second), "granted-ttl", locker.WithTTL(asked))
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		if got := locker.GrantedTTL(lease); got != want {
			t.Errorf("WithTTL(%v): GrantedTTL = %v, want %v", asked, got, want)
		}
		if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

// syncBuffer is a log destination safe for the goroutines that write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func debugLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestOpen_WithLogger_ReceivesTheClientsLines: the etcd client that Open
// makes logs through zap; its lines reach WithLogger's slog logger.
func TestOpen_WithLogger_ReceivesTheClientsLines(t *testing.T) {
	var buf syncBuffer
	_, err := locker.Open(ctxFor(t, 10*time.Second), "etcd://127.0.0.1:1/?dial_timeout=1s", locker.WithLogger(debugLogger(&buf)))
	if !errors.Is(err, locker.ErrUnavailable) {
		t.Fatalf("Open of a closed port = %v, want ErrUnavailable", err)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN msg=\"retrying of unary invoker failed\"") {
		t.Fatalf("the client's warning did not reach the logger; it got:\n%s", out)
	}
}

// TestEtcd_WithLogger_ReportsLeaseLoss: the backend's background work logs
// through WithLogger's logger.
func TestEtcd_WithLogger_ReportsLeaseLoss(t *testing.T) {
	h := newHarness(testenv.Etcd(t).Addr())
	var buf syncBuffer
	l := mustLocker(t, h, nil, locker.WithLogger(debugLogger(&buf)))
	lease, err := l.TryAcquire(ctxFor(t, 10*time.Second), "logged", locker.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	raw := h.newClient(t)
	resp, err := raw.Get(ctxFor(t, 10*time.Second), h.prefix+"logged\x00", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the lock's key: %v", err)
	}
	if _, err := raw.Revoke(ctxFor(t, 10*time.Second), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	select {
	case <-lease.Done():
	case <-ctxFor(t, 10*time.Second).Done():
		t.Fatal("Done not closed 10 s after the lease was revoked")
	}
	if out := buf.String(); !strings.Contains(out, "shared lease lost") {
		t.Fatalf("the lease's loss was not logged; the logger got:\n%s", out)
	}
}
