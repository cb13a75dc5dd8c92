package otelcheck_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	_ "github.com/distlock/locker/memory"
	_ "github.com/distlock/locker/redis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recorder is an SDK wired to in-memory exporters.
type recorder struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	opts   []locker.Option
}

func newRecorder() *recorder {
	r := &recorder{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	r.opts = []locker.Option{
		locker.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))),
		locker.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))),
	}
	return r
}

// point is one data point: its attributes (as "k=v" strings) and its value
// (a sum's value, a histogram's count).
type point struct {
	attrs map[string]string
	value int64
}

func (r *recorder) points(t *testing.T, name string) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrMap(p.Attributes), int64(p.Count)})
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrMap(p.Attributes), p.Value})
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

func attrMap(s attribute.Set) map[string]string {
	m := map[string]string{}
	for _, kv := range s.ToSlice() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// total sums the points of name whose attributes include want.
func (r *recorder) total(t *testing.T, name string, want ...string) int64 {
	t.Helper()
	var n int64
	for _, p := range r.points(t, name) {
		ok := true
		for i := 0; i < len(want); i += 2 {
			if p.attrs[want[i]] != want[i+1] {
				ok = false
			}
		}
		if ok {
			n += p.value
		}
	}
	return n
}

func TestInstruments(t *testing.T) {
	urls := map[string]func(t *testing.T) string{
		"memory": func(*testing.T) string { return "memory://otelcheck" },
		"redis":  func(t *testing.T) string { return "redis://" + testenv.Redis(t).Addr() + "/0" },
	}
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) { checkInstruments(t, backend, urls[backend](t)) })
	}
}

func checkInstruments(t *testing.T, backend, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRecorder()
	a, err := locker.Open(ctx, url, r.opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := locker.Open(ctx, url, r.opts...)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("otelcheck/%d", time.Now().UnixNano())

	held, err := a.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, key); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire on a held key = %v", err)
	}
	wait, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = b.Acquire(wait, key)
	wcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline = %v", err)
	}
	if got := r.total(t, "locker.leases.held", "locker.backend", backend); got != 1 {
		t.Errorf("leases held while one is = %d, want 1", got)
	}
	if err := held.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A lease that is not refreshed runs out: lost, cause deadline.
	short, err := a.TryAcquire(ctx, key, locker.WithTTL(200*time.Millisecond), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	// A lease still held when its Locker closes ends as closed.
	if _, err := b.TryAcquire(ctx, key+"/closed"); err != nil {
		t.Fatal(err)
	}
	b.Close()

	checks := []struct {
		name  string
		attrs []string
		want  int64
	}{
		{"locker.acquire.duration", []string{"locker.operation", "try-acquire", "locker.outcome", "acquired"}, 3},
		{"locker.acquire.duration", []string{"locker.operation", "try-acquire", "locker.outcome", "locked"}, 1},
		{"locker.acquire.duration", []string{"locker.operation", "acquire", "locker.outcome", "timeout"}, 1},
		{"locker.try_acquire.contended", nil, 1},
		{"locker.refresh.duration", []string{"locker.outcome", "ok"}, 1},
		{"locker.hold.duration", []string{"locker.end", "released"}, 1},
		{"locker.hold.duration", []string{"locker.end", "lost"}, 1},
		{"locker.hold.duration", []string{"locker.end", "closed"}, 1},
		{"locker.lease.lost", []string{"locker.cause", "closed"}, 1},
		{"locker.leases.held", nil, 0},
	}
	// The lease that ran out is reported by whichever notices first: the
	// portable layer's deadline timer or the backend's own expiry (memory's
	// store expires it at the same moment; on a loaded machine either wins).
	ranOut := r.total(t, "locker.lease.lost", "locker.backend", backend, "locker.cause", "deadline") +
		r.total(t, "locker.lease.lost", "locker.backend", backend, "locker.cause", "backend")
	if ranOut != 1 {
		t.Errorf("locker.lease.lost for the lease that ran out (cause deadline or backend) = %d, want 1 (points: %v)", ranOut, r.points(t, "locker.lease.lost"))
	}
	for _, c := range checks {
		attrs := append([]string{"locker.backend", backend}, c.attrs...)
		if got := r.total(t, c.name, attrs...); got != c.want {
			t.Errorf("%s %v = %d, want %d (points: %v)", c.name, attrs, got, c.want, r.points(t, c.name))
		}
	}
	for _, p := range r.points(t, "locker.acquire.duration") {
		if _, ok := p.attrs["locker.key"]; ok {
			t.Errorf("the key is an attribute without WithKeyAttribute: %v", p.attrs)
		}
	}

	// Spans: one per call, with the outcome, and the token of a grant.
	seen := map[string]int{}
	for _, s := range r.spans.Ended() {
		attrs := attrMap(attribute.NewSet(s.Attributes()...))
		if attrs["locker.backend"] != backend {
			continue
		}
		seen[s.Name()+" "+attrs["locker.outcome"]]++
		if s.Name() == "locker.TryAcquire" && attrs["locker.outcome"] == "ok" && attrs["locker.token"] == "" {
			t.Errorf("a granted TryAcquire's span has no token: %v", attrs)
		}
	}
	for _, want := range []string{"locker.TryAcquire ok", "locker.TryAcquire locked", "locker.Acquire timeout",
		"locker.Refresh ok", "locker.Release ok"} {
		if seen[want] == 0 {
			t.Errorf("no span %q (spans: %v)", want, seen)
		}
	}
}

// WithKeyAttribute adds the key to metrics and spans; it is Locker-wide.
func TestKeyAttribute(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	l, err := locker.Open(ctx, "memory://otelcheck-key", append(r.opts, locker.WithKeyAttribute(true))...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "reports/daily")
	if err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	if got := r.total(t, "locker.acquire.duration", "locker.key", "reports/daily"); got != 1 {
		t.Errorf("acquisitions of key reports/daily = %d, want 1", got)
	}
	if _, err := l.TryAcquire(ctx, "k", locker.WithKeyAttribute(false)); !errors.Is(err, locker.ErrInvalidOption) {
		t.Errorf("WithKeyAttribute per call = %v, want ErrInvalidOption", err)
	}
}

// A Locker given no provider reports to the global ones, including an SDK
// installed after the Locker was made (the no-op path starts no span only
// while no SDK is installed).
func TestGlobalProviders_InstalledLater(t *testing.T) {
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://otelcheck-global")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	lease, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	names := map[string]bool{}
	for _, s := range spans.Ended() {
		names[s.Name()] = true
	}
	if !names["locker.TryAcquire"] || !names["locker.Release"] {
		t.Fatalf("spans after installing a global SDK: %v, want locker.TryAcquire and locker.Release", names)
	}
}
