package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/memory"
)

type harness struct {
	store *memory.Store
	mu    sync.Mutex
	kill  map[locker.Locker]func()
}

func (h *harness) NewLocker(_ context.Context, _ *testing.T, opts ...locker.Option) (locker.Locker, error) {
	l, kill, err := memory.NewKillable(h.store, opts...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.kill[l] = kill
	h.mu.Unlock()
	return l, nil
}

// TTL is a second: at 200 ms a loaded CI run (2026-12-02, load 15 beside
// two busy processes) had a refresh, due 67 ms into the lease, miss the
// deadline 130 ms after it, and Do_RefreshesAndReleases lost its lease.
func (h *harness) TTL() time.Duration { return time.Second }
func (h *harness) FIFO() bool         { return true }

func (h *harness) Crash(_ *testing.T, l locker.Locker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kill[l]()
}

func TestConformance(t *testing.T) {
	h := &harness{store: memory.NewStore(), kill: map[locker.Locker]func(){}}
	conformance.Run(t, h)
	// A crashed client's lock stays on the store until its TTL ends.
	time.Sleep(h.TTL())
	if n := h.store.Pending(); n != 0 {
		t.Errorf("store keeps state for %d keys after every lease ended", n)
	}
}
