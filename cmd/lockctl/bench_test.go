package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
)

// testConfig is the default bench configuration, with the sizes a test can
// afford under the race detector.
func testConfig() *benchConfig {
	return &benchConfig{
		buyers: 10000, stock: 100, pauses: 3, pauseTTL: 50 * time.Millisecond,
		ops: 500, waiters: 16, ttl: locker.DefaultTTL, rounds: 1,
	}
}

// memoryTarget opens a private memory backend for one test.
func memoryTarget(t *testing.T) *target {
	t.Helper()
	l, err := locker.Open(context.Background(), "memory://"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &target{url: "memory://" + t.Name(), l: l, prefix: "test/"}
}

func TestFlashSale_WithLock_SellsExactlyTheStock(t *testing.T) {
	c := testConfig()
	r, err := flashSale(context.Background(), c, memoryTarget(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 {
		t.Fatalf("%d buyers failed, first: %s", r.Errors, r.FirstError)
	}
	if r.Sold != c.stock || r.Oversold != 0 || r.Left != 0 {
		t.Errorf("sold %d, oversold %d, left %d; want %d sold, none oversold, none left", r.Sold, r.Oversold, r.Left, c.stock)
	}
	// The first paused buyer holds the lock before the crowd may move, so it
	// reads a full stock and stalls; every paused buyer is followed by newer
	// holders, whose reads make the guard refuse its stale write. (A paused
	// buyer whose short lease ran out before its read is refused there.)
	if r.Paused < 1 || r.Refused < r.Paused {
		t.Errorf("paused %d, refused %d; want at least one pause, each refused", r.Paused, r.Refused)
	}
	if len(r.samples) != c.buyers {
		t.Errorf("%d latency samples, want one per buyer (%d)", len(r.samples), c.buyers)
	}
}

func TestFlashSale_WithoutLock_Oversells(t *testing.T) {
	// 10,000 buyers released at once, each yielding between its read and its
	// write: many read the same stock before any writes it back.
	c := testConfig()
	r, err := flashSaleUnlocked(context.Background(), c, &target{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Oversold <= 0 || r.Sold <= c.stock {
		t.Errorf("sold %d of %d, oversold %d; the control run should oversell", r.Sold, c.stock, r.Oversold)
	}
}

func TestFlashSale_NoPauses_OneBuyer(t *testing.T) {
	c := testConfig()
	c.buyers, c.pauses = 1, 0
	r, err := flashSale(context.Background(), c, memoryTarget(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sold != 1 || r.Left != c.stock-1 || r.Paused != 0 || r.Refused != 0 {
		t.Errorf("got sold %d, left %d, paused %d, refused %d; want 1, %d, 0, 0", r.Sold, r.Left, r.Paused, r.Refused, c.stock-1)
	}
}

func TestFlashSale_OnlyPausedBuyer_WriteAdmitted(t *testing.T) {
	// Nobody comes after the paused holder, so nobody touched the stock while
	// it stalled: its late write is correct and must be admitted.
	c := testConfig()
	c.buyers, c.pauses = 1, 1
	r, err := flashSale(context.Background(), c, memoryTarget(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Paused != 1 || r.Refused != 0 || r.Sold != 1 || r.Errors != 0 {
		t.Errorf("paused %d, refused %d, sold %d, errors %d (%s); want 1, 0, 1, 0", r.Paused, r.Refused, r.Sold, r.Errors, r.FirstError)
	}
}

func TestUncontended_TimesEveryPair(t *testing.T) {
	c := testConfig()
	r, err := uncontended(context.Background(), c, memoryTarget(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != c.ops || len(r.samples) != c.ops {
		t.Errorf("ops %d, samples %d; want %d each", r.Ops, len(r.samples), c.ops)
	}
}

func TestHandoff_CountsEveryHandoff(t *testing.T) {
	c := testConfig()
	tg := memoryTarget(t)
	r, err := handoff(context.Background(), c, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Ops != c.ops {
		t.Fatalf("ops %d, errors %d (%s); want %d, 0", r.Ops, r.Errors, r.FirstError, c.ops)
	}
	// Every grant but the first follows a release.
	if len(r.samples) != c.ops-1 {
		t.Errorf("%d handoff samples, want %d", len(r.samples), c.ops-1)
	}
	// Nothing left behind: the key is free.
	lease, err := tg.l.TryAcquire(context.Background(), tg.key("handoff"))
	if err != nil {
		t.Fatalf("key still held after the run: %v", err)
	}
	_ = lease.Release(context.Background())
}

func TestBench_TwoBackends_SideBySide(t *testing.T) {
	a, stdout, stderr := testApp()
	code := a.main(context.Background(), []string{"bench",
		"--backend", "memory://" + t.Name() + "a", "--backend", "memory://" + t.Name() + "b",
		"--buyers", "2000", "--ops", "200", "--waiters", "4", "--pause-ttl", "50ms", "--rounds", "2"})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	out := stdout.String()
	for _, want := range []string{
		"ok    flash sale on memory://" + t.Name() + "a: 200 units sold of 200, none oversold",
		"ok    flash sale on memory://" + t.Name() + "b: 200 units sold of 200, none oversold",
		"without a lock:",
		"uncontended acquire+release  memory://" + t.Name() + "a",
		"handoff, 4 waiters           memory://" + t.Name() + "b",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr not a terminal, yet written to: %q", stderr)
	}
}

func TestBench_BadInput_Usage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--buyers", "0"},
		{"bench", "--workloads", "nope"},
		{"bench", "--ttl", "-1s"},
		{"bench", "stray"},
		{"bench", "--backend", "nosuch://x"},
		{"bench", "--no-such-flag"},
	} {
		a, _, stderr := testApp()
		if code := a.main(context.Background(), args); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr)
		}
	}
}

func TestSummary_NearestRank(t *testing.T) {
	r := &result{}
	for i := 100; i >= 1; i-- {
		r.samples = append(r.samples, time.Duration(i))
	}
	got := r.summary()
	want := latency{N: 100, P50: 50, P90: 90, P99: 99, Max: 100}
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
}

func TestProgress_DrawsBar(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true)
	p.total = 4
	p.add(1)
	p.label("flash-sale memory://")
	if got := p.line(); !strings.HasPrefix(got, "[=======>") || !strings.Contains(got, " 25%  flash-sale memory://") {
		t.Errorf("line %q", got)
	}
	if newProgress(&buf, false) != nil {
		t.Error("progress bar made for a non-terminal")
	}
}
