package locker_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/memory"
)

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// await returns what find does, waiting up to 10 s for the record: Done
// closes before the loss is logged.
func (r *records) await(msg string) (slog.Level, map[string]string) {
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if level, attrs := r.find(msg); attrs != nil || time.Now().After(end) {
			return level, attrs
		}
	}
}

// find returns the attributes of the first record with msg, or nil.
func (r *records) find(msg string) (slog.Level, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.list {
		if rec.Message != msg {
			continue
		}
		attrs := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		return rec.Level, attrs
	}
	return 0, nil
}

// A loss is logged once, where the lease ended, with the backend, key, token
// and cause; a Locker closed with leases held logs them at debug level only.
func TestLogging_LossWithKeyTokenCause(t *testing.T) {
	ctx := context.Background()
	rec := &records{}
	l, err := memory.New(memory.NewStore(), locker.WithLogger(slog.New(rec)))
	if err != nil {
		t.Fatal(err)
	}
	// 500 ms, not less: a quiet fresh-clone run on a loaded machine
	// (2026-12-04, load 80) took longer than a 50 ms TTL to grant it, and a
	// grant later than its TTL is reported lost (ErrLeaseLost), not logged.
	lease, err := l.TryAcquire(ctx, "jobs/nightly", locker.WithTTL(500*time.Millisecond), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	level, attrs := rec.await("locker: lease lost")
	if attrs == nil {
		t.Fatal("the loss was not logged")
	}
	// The cause is the local deadline, or — when the store's own expiry
	// timer fires first, as it may on a loaded machine — the backend.
	cause := attrs["cause"]
	if level != slog.LevelWarn || attrs["backend"] != "memory" || attrs["key"] != "jobs/nightly" ||
		attrs["token"] != "1" || (cause != "deadline" && cause != "backend") || attrs["err"] == "" {
		t.Errorf("loss logged at %v with %v", level, attrs)
	}

	rec2 := &records{}
	l2, err := memory.New(memory.NewStore(), locker.WithLogger(slog.New(rec2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.TryAcquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	l2.Close()
	l.Close()
	if level, attrs := rec2.find("locker: lease lost"); attrs == nil || level != slog.LevelDebug || attrs["cause"] != "closed" {
		t.Errorf("a lease ended by Close logged at %v with %v, want debug, cause closed", level, attrs)
	}
}
