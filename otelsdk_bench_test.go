package locker_test

import (
	"testing"

	"github.com/distlock/locker"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkMemoryUncontendedSDK is BenchmarkMemoryUncontended with the
// OpenTelemetry SDK recording every metric (a manual reader) and sampling
// every span (no exporter).
func BenchmarkMemoryUncontendedSDK(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	benchmarkMemoryUncontended(b, locker.WithMeterProvider(mp), locker.WithTracerProvider(tp))
}
