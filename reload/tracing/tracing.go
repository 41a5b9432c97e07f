// Package tracing is what the stages of a sync use to be traced (OpenTelemetry): Start opens a
// child span of the one in the context, and LogHandler puts the trace and span ids of the
// context in every log line. Neither needs a tracer handed down: the span in the context
// carries its provider, so that with no span (tracing off, or work outside a sync) nothing
// is recorded. The SDK and the OTLP exporter are set up by package sidecar.
package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of the sidecar's spans.
const Scope = "github.com/haproxy-sidecar/haproxy-sidecar"

// Start opens the span name as a child of the span in ctx, with the same provider; with no
// span in ctx it records nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(Scope).Start(ctx, name, trace.WithAttributes(attrs...))
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// LogHandler adds trace_id and span_id to the records logged with a context that holds a
// recording span (the log lines of a traced sync), so that a line leads to its trace.
func LogHandler(next slog.Handler) slog.Handler { return logHandler{next} }

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.next.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.next.WithGroup(name)} }
