package main

import (
	"context"

	"github.com/distlock/locker"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// refreshCounter gives the scale workload an option that meters a Locker
// and a count of the refreshes it made: the data points of its
// locker.refresh.duration histogram.
func refreshCounter() (locker.Option, func(context.Context) uint64) {
	r := sdkmetric.NewManualReader()
	count := func(ctx context.Context) uint64 {
		var rm metricdata.ResourceMetrics
		if err := r.Collect(ctx, &rm); err != nil {
			return 0
		}
		var n uint64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "locker.refresh.duration" {
					for _, dp := range h.DataPoints {
						n += dp.Count
					}
				}
			}
		}
		return n
	}
	return locker.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))), count
}
