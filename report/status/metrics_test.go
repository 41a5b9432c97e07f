package status

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
)

// family gathers m and returns the family name.
func family(t *testing.T, m *Metrics, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

func TestBuildInfo(t *testing.T) {
	m := NewMetrics()
	m.SetBuildInfo("1.2.3", "go1.26.8", "abc123")
	m.SetBuildInfo("1.2.4", "go1.26.8", "def456") // set again: one series
	got := family(t, m, "haproxy_sidecar_build_info").GetMetric()
	if len(got) != 1 || got[0].GetGauge().GetValue() != 1 {
		t.Fatalf("build_info = %v, want one series at 1", got)
	}
	labels := map[string]string{}
	for _, l := range got[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "1.2.4" || labels["go_version"] != "go1.26.8" || labels["revision"] != "def456" {
		t.Errorf("build_info labels = %v", labels)
	}
}

func TestHealthGauges(t *testing.T) {
	m, h := NewMetrics(), &Health{}
	if err := m.ObserveHealth(h); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		t.Helper()
		return family(t, m, name).GetMetric()[0].GetGauge().GetValue()
	}
	if gauge("haproxy_sidecar_ready") != 0 || gauge("haproxy_sidecar_failing_since_timestamp_seconds") != 0 {
		t.Error("nothing live yet and no failure: ready 0, failing since 0")
	}
	h.Failed(errors.New("reload: connection refused"))
	first := gauge("haproxy_sidecar_failing_since_timestamp_seconds")
	if first == 0 {
		t.Fatal("a failed sync does not show")
	}
	h.Failed(errors.New("reload: connection refused"))
	if got := gauge("haproxy_sidecar_failing_since_timestamp_seconds"); got != first {
		t.Errorf("failing since moved from %v to %v: it is the first failure of the row", first, got)
	}
	h.Applied()
	if gauge("haproxy_sidecar_failing_since_timestamp_seconds") != 0 {
		t.Error("a sync that went through does not end the row")
	}
	h.Standby()
	if gauge("haproxy_sidecar_ready") != 1 {
		t.Error("standing by is ready")
	}
	if err := m.ObserveHealth(h); err == nil {
		t.Error("observing twice registers twice")
	}
}

// TestCountersStartAtZero: every counter, with every label value known at start, is exported
// at 0 before anything happens, so that rate() and increase() see the first event.
func TestCountersStartAtZero(t *testing.T) {
	m := NewMetrics()
	m.Reloading("master-socket")
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "haproxy_sidecar_") {
			continue // the Go runtime's and the process's
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			series[mf.GetName()] = append(series[mf.GetName()], strings.Join(labels, ","))
			switch {
			case mf.GetType() == dto.MetricType_COUNTER && s.GetCounter().GetValue() != 0:
				t.Errorf("%s{%s} = %v at start", mf.GetName(), strings.Join(labels, ","), s.GetCounter().GetValue())
			case mf.GetType() == dto.MetricType_HISTOGRAM && s.GetHistogram().GetSampleCount() != 0:
				t.Errorf("%s{%s} has %d samples at start", mf.GetName(), strings.Join(labels, ","), s.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string][]string{
		"haproxy_sidecar_renders_total":           {"result=error", "result=success", "result=unchanged"},
		"haproxy_sidecar_renders_ahead_total":     {"result=discarded", "result=used"},
		"haproxy_sidecar_reloads_total":           {"endpoint=master-socket,result=error", "endpoint=master-socket,result=failed", "endpoint=master-socket,result=success"},
		"haproxy_sidecar_rejected_total":          {"stage=decode", "stage=reload", "stage=render", "stage=test", "stage=validate"},
		"haproxy_sidecar_sync_failures_total":     {"stage=activate", "stage=read", "stage=reload", "stage=stage", "stage=state", "stage=validate", "stage=write"},
		"haproxy_sidecar_runtime_updates_total":   {"kind=backend_added", "kind=backend_removed", "kind=certificate_added", "kind=certificate_removed", "kind=certificate_updated", "kind=map_updated", "kind=server_added", "kind=server_removed", "kind=server_updated"},
		"haproxy_sidecar_reloads_avoided_total":   {""},
		"haproxy_sidecar_runtime_fallbacks_total": {""},
		"haproxy_sidecar_change_to_live_seconds":  {"path=dataplane", "path=reload", "path=runtime"},
	}
	for name, labels := range want {
		got := series[name]
		slices.Sort(got)
		for _, l := range labels {
			if !slices.Contains(got, l) {
				t.Errorf("%s{%s} missing at start (has %q)", name, l, got)
			}
		}
	}
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_COUNTER && strings.HasPrefix(mf.GetName(), "haproxy_sidecar_") && want[mf.GetName()] == nil {
			t.Errorf("counter %s is not checked here: say which series it has at start", mf.GetName())
		}
	}
}

func TestRunsConfirmedSetsTheSuccessTimestamp(t *testing.T) {
	m := NewMetrics()
	before := float64(time.Now().Unix())
	m.RunsConfirmed("abc")
	if got := family(t, m, "haproxy_sidecar_last_reload_success_timestamp_seconds").GetMetric()[0].GetGauge().GetValue(); got < before {
		t.Errorf("last success %v, want now (>= %v)", got, before)
	}
	info := family(t, m, "haproxy_sidecar_live_config_info").GetMetric()
	if len(info) != 1 || info[0].GetLabel()[0].GetValue() != "abc" {
		t.Errorf("live_config_info %v, want abc", info)
	}
	m.Reloading("master-socket")
	for _, s := range family(t, m, "haproxy_sidecar_reloads_total").GetMetric() {
		if s.GetCounter().GetValue() != 0 {
			t.Errorf("a confirmation counted as a reload: %v", s)
		}
	}
}

func TestObserveLiveFromTheChangeSeen(t *testing.T) {
	m := NewMetrics()
	m.ObserveLive(context.Background(), live.PathReload) // nothing seen: nothing observed
	seen := time.Now().Add(-1500 * time.Millisecond)
	m.ObserveLive(WithChangeSeen(context.Background(), seen), live.PathRuntime)
	for _, s := range family(t, m, "haproxy_sidecar_change_to_live_seconds").GetMetric() {
		h, path := s.GetHistogram(), s.GetLabel()[0].GetValue()
		switch {
		case path == live.PathRuntime && (h.GetSampleCount() != 1 || h.GetSampleSum() < 1.5):
			t.Errorf("runtime: %d samples, sum %v; want 1 of at least 1.5 s", h.GetSampleCount(), h.GetSampleSum())
		case path != live.PathRuntime && h.GetSampleCount() != 0:
			t.Errorf("%s: %d samples, want none", path, h.GetSampleCount())
		}
	}
}

// TestMemberReadsCounted: cluster_read_stood_in_total starts at 0 for each member cluster and
// counts, by cluster, each read of it that stood in.
func TestMemberReadsCounted(t *testing.T) {
	m := NewMetrics()
	stoodIn := m.MemberReads([]string{"west", "east"})
	stoodIn("west")
	stoodIn("west")
	got := map[string]float64{}
	for _, s := range family(t, m, "haproxy_sidecar_cluster_read_stood_in_total").GetMetric() {
		got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
	}
	if len(got) != 2 || got["west"] != 2 || got["east"] != 0 {
		t.Errorf("cluster_read_stood_in_total %v, want west 2, east 0", got)
	}
}
