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

// BenchmarkMemoryUncontendedSDKMetrics is BenchmarkMemoryUncontended with
// the OpenTelemetry SDK recording every metric and no tracer provider set
// (the global no-op one): the cost of the metrics alone.
func BenchmarkMemoryUncontendedSDKMetrics(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	benchmarkMemoryUncontended(b, locker.WithMeterProvider(mp))
}

// BenchmarkMemoryUncontendedSDKSampled is BenchmarkMemoryUncontendedSDK with
// 1% of root spans sampled (TraceIDRatioBased), as a production tracer of a
// busy service is configured: the others cost only a non-recording span.
func BenchmarkMemoryUncontendedSDKSampled(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	benchmarkMemoryUncontended(b, locker.WithMeterProvider(mp), locker.WithTracerProvider(tp))
}
