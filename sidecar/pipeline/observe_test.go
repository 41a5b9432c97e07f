package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/tracing"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/status"
)

// changeToLive is how many changes went live by path, and the sum of their times.
func changeToLive(t *testing.T, m *status.Metrics, path string) (uint64, float64) {
	t.Helper()
	var d dto.Metric
	if err := m.ChangeToLive.WithLabelValues(path).(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
}

// TestChangeToLiveByPath: change_to_live_seconds counts from the first change notification to
// the moment the configuration holding it is live, under the path it went by; a change that
// failed to go live is counted, from its first notification, when it does.
func TestChangeToLiveByPath(t *testing.T) {
	r := newRig(t, 0)
	r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")
	if n, _ := changeToLive(t, r.metrics, live.PathReload); n != 0 {
		t.Fatalf("the first sync, which no change asked for, counted %d", n)
	}

	r.p.Changed()
	r.sync(t, cfgText(":80", "a 10.0.0.1:80", "b 10.0.0.2:80"), "applied")
	if n, _ := changeToLive(t, r.metrics, live.PathRuntime); n != 1 {
		t.Errorf("a server added through the runtime API: %d runtime observations, want 1", n)
	}

	r.p.Changed()
	notified := time.Now()
	r.rl.failErr = errors.New("master socket: connection refused")
	r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "error")
	if n, _ := changeToLive(t, r.metrics, live.PathReload); n != 0 {
		t.Fatalf("a reload that failed counted %d", n)
	}
	r.rl.failErr = nil
	retried := time.Now()
	r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "applied") // the retry: no new notification
	n, sum := changeToLive(t, r.metrics, live.PathReload)
	if n != 1 {
		t.Fatalf("the change live at the retry: %d reload observations, want 1", n)
	}
	if least := retried.Sub(notified).Seconds(); sum < least {
		t.Errorf("observed %vs, less than the %vs between its notification and the retry: not counted from the first notification", sum, least)
	}
	if n, _ := changeToLive(t, r.metrics, live.PathRuntime); n != 1 {
		t.Errorf("runtime observations %d, want still 1", n)
	}
	r.sync(t, cfgText(":81", "a 10.0.0.1:80"), "unchanged")
	if n, _ := changeToLive(t, r.metrics, live.PathReload); n != 1 {
		t.Errorf("a sync with nothing seen counted again: %d", n)
	}
}

// TestSyncTrace: a sync is one trace from the change seen: the wait, the rendering and its
// validation, the decision carried out (here a reload); the sync's log lines carry its ids.
func TestSyncTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	var logs bytes.Buffer
	r := newRig(t, 0, func(c *Config) {
		c.Tracing = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		c.Logger = slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil)))
	})
	r.p.Changed()
	r.sync(t, cfgText(":80", "a 10.0.0.1:80"), "applied")

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = s
	}
	sync := byName["sync"]
	if sync == nil {
		t.Fatalf("no sync span among %v", spans.Ended())
	}
	for child, parent := range map[string]string{"wait": "sync", "render": "sync", "validate": "sync", "apply": "sync", "reload": "apply"} {
		s := byName[child]
		switch {
		case s == nil:
			t.Errorf("no %s span", child)
		case s.Parent().SpanID() != byName[parent].SpanContext().SpanID():
			t.Errorf("%s is not below %s", child, parent)
		case s.SpanContext().TraceID() != sync.SpanContext().TraceID():
			t.Errorf("%s is in another trace", child)
		}
	}
	if w := byName["wait"]; w != nil && (w.StartTime() != sync.StartTime() || w.EndTime().After(byName["render"].StartTime())) {
		t.Error("the wait does not run from the sync's start (the change seen) to the rendering")
	}
	attrs := map[string]string{}
	for _, kv := range sync.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["sync.outcome"] != "applied" || attrs["sync.action"] != "reload" {
		t.Errorf("sync attributes %v", attrs)
	}

	var live map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l["msg"] == "configuration live" {
			live = l
		}
	}
	if live == nil || live["trace_id"] != sync.SpanContext().TraceID().String() {
		t.Errorf("the line saying the configuration is live: %v, want trace_id %s", live, sync.SpanContext().TraceID())
	}
}
