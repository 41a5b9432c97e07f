package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
)

func TestTracingIsOnOnlyWithAnOTLPEndpoint(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		protocol string // "" off
		err      string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "lb"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, protocol: "grpc"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, protocol: "http/protobuf"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: want http/protobuf or grpc"},
	} {
		protocol, on, err := otlpProtocol(func(k string) string { return c.env[k] })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.env, err, c.err)
			}
		case err != nil || on != (c.protocol != "") || protocol != c.protocol:
			t.Errorf("%v: %q %v %v, want %q", c.env, protocol, on, err, c.protocol)
		}
	}
}

// TestSpansCarryNoSecret: what a span says (its error, attributes, events) leaves with every
// secret the redactor knows masked, as in the log.
func TestSpansCarryNoSecret(t *testing.T) {
	red := &redact.Redactor{}
	red.Set("stats", "hunter2-stats-Pa55")
	out := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(redactingExporter{next: out, red: red}))
	_, span := tp.Tracer("test").Start(context.Background(), "reload",
		trace.WithAttributes(attribute.String("reload.why", "stats auth admin:hunter2-stats-Pa55"),
			attribute.StringSlice("lines", []string{"ok", "password hunter2-stats-Pa55"}), attribute.Int("n", 2)))
	span.AddEvent("refused", trace.WithAttributes(attribute.String("output", "[ALERT] hunter2-stats-Pa55")))
	span.SetStatus(codes.Error, errors.New("haproxy: hunter2-stats-Pa55 is wrong").Error())
	span.End() // exported at once (WithSyncer)
	spans := out.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported", len(spans))
	}
	s := spans[0]
	said := []string{s.Status.Description, s.Name}
	for _, kv := range s.Attributes {
		said = append(said, kv.Value.Emit())
	}
	for _, ev := range s.Events {
		for _, kv := range ev.Attributes {
			said = append(said, kv.Value.Emit())
		}
	}
	all := strings.Join(said, "\n")
	if strings.Contains(all, "hunter2") {
		t.Errorf("a secret left in a span:\n%s", all)
	}
	if !strings.Contains(all, "stats auth admin:") || !strings.Contains(all, "2") || s.Status.Code != codes.Error {
		t.Errorf("the span lost what it said besides the secret:\n%s", all)
	}
}

func TestAnSDKErrorIsOneWarning(t *testing.T) {
	var buf strings.Builder
	handle := sdkErrors(slog.New(slog.NewTextHandler(&buf, nil)))
	refused := errors.New(`traces export: Post "http://collector:4318/v1/traces": connection refused`)
	handle(refused)
	handle(refused)
	handle(errors.New("traces export: context deadline exceeded"))
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want one per distinct error:\n%s", n, buf.String())
	}
}
