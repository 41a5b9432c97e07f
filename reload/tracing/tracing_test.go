package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestStartIsAChildOfTheSpanInTheContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, sync := tp.Tracer("test").Start(context.Background(), "sync")
	_, render := Start(ctx, "render")
	End(render, errors.New("template: boom"))
	sync.End()

	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "render" {
		t.Fatalf("ended spans %v, want render then sync", ended)
	}
	r := ended[0]
	if r.Parent().SpanID() != ended[1].SpanContext().SpanID() || r.SpanContext().TraceID() != ended[1].SpanContext().TraceID() {
		t.Error("render is not a child of sync")
	}
	if r.Status().Code != codes.Error || r.Status().Description != "template: boom" {
		t.Errorf("render's status %+v, want the error", r.Status())
	}
}

func TestStartWithoutASpanRecordsNothing(t *testing.T) {
	ctx, span := Start(context.Background(), "render")
	defer span.End()
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Error("a span outside any trace is recorded")
	}
	var buf bytes.Buffer
	slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).InfoContext(ctx, "outside a sync")
	if bytes.Contains(buf.Bytes(), []byte("trace_id")) {
		t.Errorf("a line outside any trace has a trace id: %s", buf.String())
	}
}

func TestLogLinesOfASpanCarryItsIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "sync")
	defer span.End()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "pipeline")
	log.InfoContext(ctx, "configuration live", "hash", "abc")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() {
		t.Errorf("line %v, want trace_id %s span_id %s", line, sc.TraceID(), sc.SpanID())
	}
	if line["component"] != "pipeline" || line["hash"] != "abc" {
		t.Errorf("line %v lost its other attributes", line)
	}
}
