package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// exampleDir is a copy of examples/local.
func exampleDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := copyDir("../examples/local", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scrape reads the sidecar's /metrics (nil while it does not answer).
func scrape(addr string) map[string]*dto.MetricFamily {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return mfs
}

// TestEveryCounterIsThereAtStart scrapes /metrics while the first sync waits in haproxy -c:
// every counter family is there with each series it will have, all at 0 (so that the first
// reload, rejection or failure shows in rate() and increase()).
func TestEveryCounterIsThereAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	real := haproxytest.Binary(t)
	dir, run := exampleDir(t), t.TempDir()
	gate := filepath.Join(run, "gate")
	bin := filepath.Join(run, "haproxy")
	script := fmt.Sprintf("#!/bin/sh\nwhile [ ! -e %q ]; do sleep 0.02; done\nexec %q \"$@\"\n", gate, real)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	runSidecar(t, io.Discard, "--source=file", "--dir", dir, "--haproxy-config", filepath.Join(run, "haproxy.cfg"),
		"--master-socket", filepath.Join(run, "master.sock"), "--haproxy-bin", bin,
		"--metrics-addr", metrics, "--health-addr", fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t)))

	var mfs map[string]*dto.MetricFamily
	haproxytest.WaitFor(t, 10*time.Second, func() bool { mfs = scrape(metrics); return mfs != nil }, "/metrics answers")
	want := map[string]int{ // counter family: its series at start
		"haproxy_sidecar_renders_total": 3, "haproxy_sidecar_renders_ahead_total": 2,
		"haproxy_sidecar_reloads_total": 3, "haproxy_sidecar_rejected_total": 5,
		"haproxy_sidecar_sync_failures_total": 7, "haproxy_sidecar_runtime_updates_total": 9,
		"haproxy_sidecar_reloads_avoided_total": 1, "haproxy_sidecar_runtime_fallbacks_total": 1,
	}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "haproxy_sidecar_") || mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		if _, ok := want[name]; !ok {
			t.Errorf("counter %s is not checked here: say which series it has at start", name)
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%v = %v at start", name, m.GetLabel(), v)
			}
		}
	}
	for name, n := range want {
		if got := len(mfs[name].GetMetric()); got != n {
			t.Errorf("%s has %d series at start, want %d", name, got, n)
		}
	}
	for _, m := range mfs["haproxy_sidecar_reloads_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() != "master-socket" {
			t.Errorf("reloads_total%v: want the endpoint master-socket", m.GetLabel())
		}
	}
	if got := len(mfs["haproxy_sidecar_change_to_live_seconds"].GetMetric()); got != 3 {
		t.Errorf("change_to_live_seconds has %d series at start, want one per path", got)
	}

	// Once haproxy -c answers, the first rendering is counted: the zeros were the start's.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		for _, m := range scrape(metrics)["haproxy_sidecar_renders_total"].GetMetric() {
			if m.GetLabel()[0].GetValue() == "success" && m.GetCounter().GetValue() == 1 {
				return true
			}
		}
		return false
	}, "the first rendering counted")
}

// receiver is an OTLP/HTTP trace receiver: it keeps the spans it is sent.
type receiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		http.Error(w, fmt.Sprintf("%s %s: %v", r.URL.Path, r.Header.Get("Content-Type"), err), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				rc.services = append(rc.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// trace returns the spans of the first trace with a sync span that has every one of names
// below it, by name.
func (rc *receiver) trace(names ...string) map[string]*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	byTrace := map[string]map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		id := fmt.Sprintf("%x", s.GetTraceId())
		if byTrace[id] == nil {
			byTrace[id] = map[string]*tracepb.Span{}
		}
		byTrace[id][s.GetName()] = s
	}
	for _, spans := range byTrace {
		ok := spans["sync"] != nil
		for _, n := range names {
			ok = ok && spans[n] != nil
		}
		if ok {
			return spans
		}
	}
	return nil
}

// TestTracesOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, each sync is a trace sent over
// OTLP/HTTP (render, validate, apply and the reload below its sync span), and the log lines
// of the sync name it.
func TestTracesOverOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	haproxytest.Binary(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // ms: export at once
	dir, run := exampleDir(t), t.TempDir()
	logs := &haproxytest.SyncBuffer{}
	runSidecar(t, logs, "--source=file", "--dir", dir, "--haproxy-config", filepath.Join(run, "haproxy.cfg"),
		"--reload=none", "--log-format=json", "--metrics-addr=", "--health-addr=")

	var spans map[string]*tracepb.Span
	haproxytest.WaitFor(t, 20*time.Second, func() bool {
		spans = rc.trace("render", "validate", "apply", "reload")
		return spans != nil
	}, "a sync's trace received over OTLP")
	sync := spans["sync"]
	for name, parent := range map[string]string{"render": "sync", "validate": "sync", "apply": "sync", "reload": "apply"} {
		if got, want := spans[name].GetParentSpanId(), spans[parent].GetSpanId(); string(got) != string(want) {
			t.Errorf("%s is not below %s", name, parent)
		}
	}
	rc.mu.Lock()
	if len(rc.services) == 0 || rc.services[0] != "haproxy-sidecar" {
		t.Errorf("service.name %v, want haproxy-sidecar", rc.services)
	}
	rc.mu.Unlock()

	traceID := fmt.Sprintf("%x", sync.GetTraceId())
	found := false
	for _, line := range strings.Split(logs.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "configuration live" {
			found = l["trace_id"] == traceID
		}
	}
	if !found {
		t.Errorf("no \"configuration live\" line with trace_id %s in\n%s", traceID, logs.String())
	}
}
