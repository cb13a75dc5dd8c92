package locker

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the OpenTelemetry scope name of this package.
const instrumentation = "github.com/distlock/locker"

// The attribute keys locker reports (the metric and span table of
// README.md).
const (
	attrBackend = attribute.Key("locker.backend")
	attrOp      = attribute.Key("locker.operation")
	attrOutcome = attribute.Key("locker.outcome")
	attrEnd     = attribute.Key("locker.end")
	attrCause   = attribute.Key("locker.cause")
	attrKey     = attribute.Key("locker.key")
	attrToken   = attribute.Key("locker.token")
)

// outcomes are the values of the outcome attribute; outcome picks one.
var outcomes = [...]string{"ok", "locked", "timeout", "canceled", "closed", "invalid", "lost", "unavailable"}

const outcomeOK, outcomeLocked = 0, 1

// outcome classifies how a call ended, as an index into outcomes.
func outcome(err error) int {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, ErrLocked):
		return outcomeLocked
	case errors.Is(err, context.DeadlineExceeded):
		return 2
	case errors.Is(err, context.Canceled):
		return 3
	case errors.Is(err, ErrClosed):
		return 4
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidOption):
		return 5
	case errors.Is(err, ErrLeaseLost):
		return 6
	default:
		return 7
	}
}

// How a lease ended (the end attribute) and, when lost, why (cause).
const (
	endReleased = "released"
	endLost     = "lost"
	endClosed   = "closed"

	causeDeadline = "deadline" // the local deadline passed without a refresh
	causeBackend  = "backend"  // the backend reported the lock gone
	causeRefresh  = "refresh"  // a refresh failed or was ambiguous
	causeRelease  = "release"  // a release found the lock gone
	causePublish  = "publish"  // a Publish found the lock gone
	causeClosed   = "closed"   // the Locker was closed
)

// Indexes into causes.
const (
	iDeadline = iota
	iBackend
	iRefresh
	iRelease
	iClosed
	iPublish
)

var (
	ends   = [...]string{endReleased, endLost, endClosed}
	causes = [...]string{causeDeadline, causeBackend, causeRefresh, causeRelease, causeClosed, causePublish}
	ops    = [...]string{"acquire", "try-acquire"}
)

// unsetTracing is the global TracerProvider as it was when this package was
// initialised: the API's delegating default, unless a package initialised
// earlier installed an SDK. While it is still the global provider, no SDK
// has been installed, so a Locker given no provider of its own starts no
// span at all: even a no-op span costs allocations on every call.
var unsetTracing = otel.GetTracerProvider()

// spanStart are the options of every span, made once.
var spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// telemetry holds a Locker's instruments. With the API's no-op providers
// (no SDK installed) every call on them does nothing.
type telemetry struct {
	tracer  trace.Tracer // WithTracerProvider's tracer
	ownTP   bool         // the tracer provider was given (WithTracerProvider)
	keyAttr bool
	backend attribute.KeyValue

	acquireDur metric.Float64Histogram
	holdDur    metric.Float64Histogram
	refreshDur metric.Float64Histogram
	lost       metric.Int64Counter
	refreshErr metric.Int64Counter
	contended  metric.Int64Counter
	held       metric.Int64UpDownCounter

	// The attribute sets of every event, made once, so that recording
	// allocates nothing (unless the key is an attribute too).
	plain   attrSet
	acquire [len(ops)][len(outcomes)]attrSet
	refresh [len(outcomes)]attrSet
	hold    [len(ends)]attrSet
	cause   [len(causes)]attrSet
}

// attrSet is one set of attributes, ready to pass to Add or Record: the
// option slices are made once, since a variadic slice passed to an
// interface method is otherwise allocated at every call.
type attrSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newTelemetry(backend string, o *options) (*telemetry, error) {
	mp, tp := o.meterProvider, o.tracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	m := mp.Meter(instrumentation)
	t := &telemetry{tracer: tp.Tracer(instrumentation), ownTP: o.tracerProvider != nil,
		keyAttr: o.keyAttr, backend: attrBackend.String(backend)}
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	count := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit("{lease}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	t.acquireDur = hist("locker.acquire.duration", "Time from an Acquire or TryAcquire call to its grant or error.")
	t.holdDur = hist("locker.hold.duration", "Time a lease was held, from grant to its end.")
	t.refreshDur = hist("locker.refresh.duration", "Time a refresh took.")
	t.lost = count("locker.lease.lost", "Leases that ended without Release.")
	t.refreshErr = count("locker.refresh.failures", "Refreshes that failed (each ends its lease).")
	t.contended = count("locker.try_acquire.contended", "TryAcquire calls that found the key held.")
	var err error
	t.held, err = m.Int64UpDownCounter("locker.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now."))
	errs = append(errs, err)
	set := func(kv ...attribute.KeyValue) attrSet {
		o := metric.WithAttributeSet(attribute.NewSet(append(kv, t.backend)...))
		return attrSet{[]metric.AddOption{o}, []metric.RecordOption{o}}
	}
	t.plain = set()
	for i, op := range ops {
		for j, o := range outcomes {
			if o == "ok" {
				o = "acquired"
			}
			t.acquire[i][j] = set(attrOp.String(op), attrOutcome.String(o))
		}
	}
	for j, o := range outcomes {
		t.refresh[j] = set(attrOutcome.String(o))
	}
	for i, e := range ends {
		t.hold[i] = set(attrEnd.String(e))
	}
	for i, c := range causes {
		t.cause[i] = set(attrCause.String(c))
	}
	return t, errors.Join(errs...)
}

// with and withRecord add the key to a measurement's attributes when
// WithKeyAttribute asked for it.
func (t *telemetry) with(set attrSet, key string) []metric.AddOption {
	if !t.keyAttr {
		return set.add
	}
	return append(set.add[:1:1], metric.WithAttributes(attrKey.String(key)))
}

func (t *telemetry) withRecord(set attrSet, key string) []metric.RecordOption {
	if !t.keyAttr {
		return set.rec
	}
	return append(set.rec[:1:1], metric.WithAttributes(attrKey.String(key)))
}

// start begins the span of an operation on key; the span is nil when no
// tracing is set up.
func (t *telemetry) start(ctx context.Context, name, key string) (context.Context, trace.Span) {
	tracer := t.tracer
	if !t.ownTP {
		// Follow the global provider as it is now: an application may
		// install or replace its SDK after making the Locker.
		tp := otel.GetTracerProvider()
		if tp == unsetTracing {
			return ctx, nil
		}
		tracer = tp.Tracer(instrumentation)
	}
	ctx, span := tracer.Start(ctx, name, spanStart...)
	if span.IsRecording() {
		span.SetAttributes(t.backend)
		if t.keyAttr {
			span.SetAttributes(attrKey.String(key))
		}
	}
	return ctx, span
}

// end ends an operation's span with its outcome.
func (t *telemetry) end(span trace.Span, err error, token uint64) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcomes[outcome(err)]))
		if token != 0 {
			span.SetAttributes(attrToken.Int64(int64(token)))
		}
		if err != nil && !errors.Is(err, ErrLocked) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// acquired records an Acquire (op 0) or TryAcquire (op 1) that began at
// start.
func (t *telemetry) acquired(ctx context.Context, op int, key string, start time.Time, err error) {
	o := outcome(err)
	t.acquireDur.Record(ctx, time.Since(start).Seconds(), t.withRecord(t.acquire[op][o], key)...)
	if o == outcomeLocked && op == 1 {
		t.contended.Add(ctx, 1, t.with(t.plain, key)...)
	}
}

// refreshed records one refresh.
func (t *telemetry) refreshed(ctx context.Context, key string, start time.Time, err error) {
	o := outcome(err)
	t.refreshDur.Record(ctx, time.Since(start).Seconds(), t.withRecord(t.refresh[o], key)...)
	if err != nil {
		t.refreshErr.Add(ctx, 1, t.with(t.plain, key)...)
	}
}

// granted and ended count a lease in and out of the held gauge (which never
// carries the key); ended also records the hold time and, for a lease not
// released, the loss and its cause.
func (t *telemetry) granted() { t.held.Add(context.Background(), 1, t.plain.add...) }

func (t *telemetry) ended(key string, granted time.Time, end, cause int) {
	ctx := context.Background()
	t.held.Add(ctx, -1, t.plain.add...)
	t.holdDur.Record(ctx, time.Since(granted).Seconds(), t.withRecord(t.hold[end], key)...)
	if ends[end] != endReleased {
		t.lost.Add(ctx, 1, t.with(t.cause[cause], key)...)
	}
}
