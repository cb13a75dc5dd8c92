package locker_test

import (
	"context"
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/memory"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkMemoryUncontended is one uncontended TryAcquire+Release on the
// memory backend, where the portable layer's own cost is most of the time:
// the measure of instrumentation overhead (otelsdk_bench_test.go runs it
// with the OpenTelemetry SDK installed).
func BenchmarkMemoryUncontended(b *testing.B) {
	benchmarkMemoryUncontended(b)
}

func benchmarkMemoryUncontended(b *testing.B, opts ...locker.Option) {
	ctx := context.Background()
	l, err := memory.New(memory.NewStore(), append(opts, locker.WithAutoRefresh(false))...)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for b.Loop() {
		lease, err := l.TryAcquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryUncontendedNoop is BenchmarkMemoryUncontended with the
// OpenTelemetry API's no-op providers given explicitly.
func BenchmarkMemoryUncontendedNoop(b *testing.B) {
	benchmarkMemoryUncontended(b, locker.WithMeterProvider(metricnoop.NewMeterProvider()),
		locker.WithTracerProvider(tracenoop.NewTracerProvider()))
}
