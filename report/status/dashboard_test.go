package status

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestDashboardAndAlertsUseTheMetrics: every haproxy_sidecar_ metric the Grafana dashboard and
// the chart's alert rules name is one the sidecar exports (a rename breaks this, not a panel).
func TestDashboardAndAlertsUseTheMetrics(t *testing.T) {
	m := NewMetrics()
	if err := m.ObserveHealth(&Health{}); err != nil {
		t.Fatal(err)
	}
	m.SetBuildInfo("1", "go", "r")
	m.Registry.MustRegister(NewOldWorkers(func(context.Context) (int, error) { return 0, nil }))
	m.Reloads.WithLabelValues("master-socket", "success") // vectors show once they have a series
	m.LiveGenerationInfo.WithLabelValues("hash")
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		exported[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[mf.GetName()+suffix] = true
			}
		}
	}
	for _, f := range []string{"../../charts/haproxy-sidecar/dashboards/haproxy-sidecar.json", "../../charts/haproxy-sidecar/templates/prometheusrule.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names := regexp.MustCompile(`haproxy_sidecar_[a-z_]+`).FindAllString(string(b), -1)
		if len(names) < 5 {
			t.Fatalf("%s names %d metrics", f, len(names))
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s uses %s, which the sidecar does not export", f, n)
			}
		}
		for _, want := range []string{"held_inputs", "haproxy_up", "ready", "failing_since", "reloads_total"} {
			if !strings.Contains(string(b), "haproxy_sidecar_"+want) {
				t.Errorf("%s does not watch haproxy_sidecar_%s", f, want)
			}
		}
	}
}
