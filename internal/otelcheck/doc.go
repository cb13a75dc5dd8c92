// Package otelcheck holds the tests of locker's OpenTelemetry metrics and
// spans, recorded with the SDK's in-memory reader and span recorder, on the
// memory backend and on a real Redis.
package otelcheck
