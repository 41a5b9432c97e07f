package status

import (
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
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
