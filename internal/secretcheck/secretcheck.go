// Package secretcheck finds secrets where they must never be: in errors,
// log records, spans and metric attributes. A test opens a Locker with the
// Recorder's options, works it (a refused password, a grant, a release, a
// lost lease), hands Check every error it saw and the secrets, and Check
// fails the test naming each place a secret showed up.
package secretcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/distlock/locker"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A Recorder keeps everything a Locker logs (at debug level), every span
// it ends and every metric it records.
type Recorder struct {
	mu     sync.Mutex
	logs   bytes.Buffer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

// New returns a Recorder; pass Options to locker.Open or a backend's New.
func New() *Recorder {
	return &Recorder{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
}

// Logger logs every record, at every level, into the Recorder.
func (r *Recorder) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{r}, &slog.HandlerOptions{Level: slog.LevelDebug - 8}))
}

// Options are the logger, meter and tracer options that record into r.
func (r *Recorder) Options() []locker.Option {
	return []locker.Option{
		locker.WithLogger(r.Logger()),
		locker.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))),
		locker.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))),
		locker.WithKeyAttribute(true),
	}
}

type lockedWriter struct{ r *Recorder }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.logs.Write(p)
}

// Check fails t for each secret found in errs, in the logs, or in a span
// (name, attributes, events, status) or metric attribute recorded so far.
// It also fails t if nothing at all was recorded, so that a test whose
// wiring broke cannot pass by seeing nothing.
func (r *Recorder) Check(t testing.TB, secrets []string, errs ...error) {
	t.Helper()
	var places []string // "where: text"
	for i, err := range errs {
		if err != nil {
			places = append(places, fmt.Sprintf("error %d: %v", i, err))
		}
	}
	r.mu.Lock()
	logs := r.logs.String()
	r.mu.Unlock()
	for line := range strings.Lines(logs) {
		places = append(places, "log: "+line)
	}
	spans := r.spans.Ended()
	for _, s := range spans {
		text := s.Name() + " " + s.Status().Description + attrs(s.Attributes())
		for _, e := range s.Events() {
			text += " " + e.Name + attrs(e.Attributes)
		}
		places = append(places, "span: "+text)
	}
	var rm metricdata.ResourceMetrics
	// A reader no provider registered (Options unused) has nothing.
	if err := r.reader.Collect(context.Background(), &rm); err != nil && !errors.Is(err, sdkmetric.ErrReaderNotRegistered) {
		t.Fatalf("secretcheck: collect metrics: %v", err)
	}
	metrics := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			metrics++
			for _, set := range pointAttrs(m.Data) {
				places = append(places, "metric "+m.Name+":"+attrs(set.ToSlice()))
			}
		}
	}
	if logs == "" && len(spans) == 0 && metrics == 0 {
		t.Fatal("secretcheck: nothing was logged, traced or measured: the Recorder's options were not used")
	}
	for _, secret := range secrets {
		if secret == "" {
			t.Fatal("secretcheck: an empty secret matches everything")
		}
		for _, p := range places {
			if strings.Contains(p, secret) {
				t.Errorf("secret %q found in %s", secret, strings.TrimSpace(p))
			}
		}
	}
}

func attrs(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		b.WriteString(" " + string(kv.Key) + "=" + kv.Value.Emit())
	}
	return b.String()
}

func pointAttrs(data metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch d := data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}
