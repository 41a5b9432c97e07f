package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/haproxy-sidecar/haproxy-sidecar/report/redact"
)

// otlpProtocol says whether the standard OpenTelemetry environment asks for traces over OTLP
// and with which protocol: only when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER
// is none. The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc.
func otlpProtocol(getenv func(string) string) (protocol string, on bool, err error) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return "", false, nil
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return "", false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return "", false, nil
	default:
		return "", false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: the sidecar exports traces over otlp (or none)", exp)
	}
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocol = strings.TrimSpace(getenv(name))
	if protocol == "" {
		name, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch protocol {
	case "":
		return "http/protobuf", true, nil
	case "http/protobuf", "grpc":
		return protocol, true, nil
	}
	return "", false, fmt.Errorf("%s=%s: want http/protobuf or grpc", name, protocol)
}

// startTracing sets up OpenTelemetry tracing when the environment asks for it (otlpProtocol):
// each sync is a trace exported over OTLP, the exporter configured by the standard OTEL_*
// variables (endpoint, headers, certificates, timeout, compression; the sampler; the batch
// processor; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES). It returns nil when tracing is
// off, and a function that flushes the spans left and stops. No secret red knows leaves in a
// span.
func startTracing(ctx context.Context, getenv func(string) string, build BuildInfo, instance string, red *redact.Redactor, log *slog.Logger, process bool) (trace.TracerProvider, func(), error) {
	protocol, on, err := otlpProtocol(getenv)
	if err != nil || !on {
		return nil, func() {}, err
	}
	var exp sdktrace.SpanExporter
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry: the OTLP exporter (%s): %w", protocol, err)
	}
	// The variables win over these defaults (resource.New merges left to right).
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "haproxy-sidecar"), attribute.String("service.version", build.Version),
			attribute.String("service.instance.id", instance)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		log.Warn("OpenTelemetry: the resource attributes", "error", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(redactingExporter{next: exp, red: red}), sdktrace.WithResource(res))
	if process {
		// The SDK's own errors (the collector not answering, say) go to the sidecar's log
		// rather than to stderr; one handler per process, as for client-go's log.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(sdkErrors(log)))
	}
	log.Info("tracing each sync with OpenTelemetry, exported over OTLP", "protocol", protocol)
	return tp, func() {
		// Bounded: the sidecar stops within 5 s of SIGTERM even when the collector is away.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("OpenTelemetry: the last spans were not exported", "error", err)
		}
	}, nil
}

// sdkErrors logs the SDK's errors: a WARN line when one differs from the last (a collector
// away fails every export the same way), DEBUG for the same again.
func sdkErrors(log *slog.Logger) func(error) {
	var mu sync.Mutex
	last := ""
	return func(err error) {
		mu.Lock()
		again := err.Error() == last
		last = err.Error()
		mu.Unlock()
		if again {
			log.Debug("OpenTelemetry (again)", "error", err)
			return
		}
		log.Warn("OpenTelemetry", "error", err)
	}
}

// redactingExporter masks the secrets red knows in what a span says (its status, attributes
// and events): an error in a span may quote what a log line would have redacted.
type redactingExporter struct {
	next sdktrace.SpanExporter
	red  *redact.Redactor
}

func (e redactingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		stub := tracetest.SpanStubFromReadOnlySpan(s)
		stub.Status.Description = e.red.String(stub.Status.Description)
		stub.Attributes = e.attrs(stub.Attributes)
		stub.Events = slices.Clone(stub.Events)
		for j, ev := range stub.Events {
			stub.Events[j].Name, stub.Events[j].Attributes = e.red.String(ev.Name), e.attrs(ev.Attributes)
		}
		out[i] = stub.Snapshot()
	}
	return e.next.ExportSpans(ctx, out)
}

func (e redactingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

func (e redactingExporter) attrs(in []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(in))
	for i, kv := range in {
		switch kv.Value.Type() {
		case attribute.STRING:
			kv.Value = attribute.StringValue(e.red.String(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := kv.Value.AsStringSlice()
			for j := range ss {
				ss[j] = e.red.String(ss[j])
			}
			kv.Value = attribute.StringSliceValue(ss)
		}
		out[i] = kv
	}
	return out
}
