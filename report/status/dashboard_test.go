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
		// A sidecar that is down exports nothing: only Prometheus' own up series can tell.
		if !upSeries.Match(b) {
			t.Errorf("%s does not watch up: a dead sidecar shows nowhere", f)
		}
	}
}

// upSeries finds Prometheus' own up series (not haproxy_sidecar_haproxy_up).
var upSeries = regexp.MustCompile(`(^|[^a-z_])up\{`)

// TestAlertsSeeADeadSidecar: every alert but two reads the sidecar's own metrics, which a
// crash-looping sidecar does not export; those two read Prometheus' up series of its target: one
// that is down, and none scraped at all.
func TestAlertsSeeADeadSidecar(t *testing.T) {
	b, err := os.ReadFile("../../charts/haproxy-sidecar/templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+- alert: (\w+)\n\s+expr: (.*)$`).FindAllStringSubmatch(string(b), -1) {
		exprs[m[1]] = m[2]
	}
	if e := exprs["HAProxySidecarDown"]; !regexp.MustCompile(`^up\{.*\} == 0$`).MatchString(e) {
		t.Errorf("HAProxySidecarDown: %q, want up{...} == 0", e)
	}
	if e := exprs["HAProxySidecarAbsent"]; !regexp.MustCompile(`^absent\(up\{.*\}\)$`).MatchString(e) {
		t.Errorf("HAProxySidecarAbsent: %q, want absent(up{...})", e)
	}
	for name, e := range exprs {
		if !strings.Contains(e, "haproxy_sidecar_") && !upSeries.MatchString(e) {
			t.Errorf("%s reads neither the sidecar's metrics nor up: %q", name, e)
		}
	}
}
