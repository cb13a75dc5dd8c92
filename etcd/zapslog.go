package etcd

import (
	"context"
	"log/slog"
	"slices"

	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core writing to a slog.Handler: the etcd client
// logs through zap, locker through slog (WithLogger). zap's exp/zapslog
// goes the other way; a Core is all the client needs.
type slogCore struct {
	h     slog.Handler
	attrs []slog.Attr // fields given to With, in order
}

func newSlogCore(h slog.Handler) zapcore.Core { return &slogCore{h: h} }

// slogLevel maps zap's levels to slog's; DPanic, Panic and Fatal are errors
// (zap itself panics or exits after writing them, as it would anyway).
func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, attrs: append(slices.Clip(c.attrs), attrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// attrs turns zap fields into slog attributes, in the fields' order; each
// field is rendered by zap's own encoder (durations, errors, objects…).
func attrs(fields []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			out = append(out, slog.Any(k, v))
		}
	}
	return out
}
