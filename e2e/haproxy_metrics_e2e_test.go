package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
)

// TestHAProxyMetricsOnTheDashboard: the built-in template (what the chart ships), given
// METRICS_BIND as the chart gives it, serves HAProxy's /healthz and its Prometheus exporter; every
// HAProxy metric the dashboard names is one that exporter exports, on each HAProxy version.
func TestHAProxyMetricsOnTheDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test with a real HAProxy")
	}
	e := newDemoEnv(t)
	if err := os.Remove(filepath.Join(e.dir, "config.yaml")); err != nil { // the built-in template
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", haproxytest.FreePort(t))
	t.Setenv("METRICS_BIND", metricsAddr)
	t.Setenv("HARD_STOP_AFTER", "7s")
	t.Setenv("MAXCONN", "1000") // within the test machine's file descriptor limit
	e.startSidecar(t, "--env-allow", "HTTP_BIND,HTTPS_BIND,STATS_BIND,METRICS_BIND,HARD_STOP_AFTER,MAXCONN")
	e.startHAProxy(t)
	e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-") // traffic, so that the counters have series

	cfg, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "hard-stop-after 7s\n") {
		t.Errorf("the rendering does not take HARD_STOP_AFTER:\n%s", cfg)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + metricsAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("HAProxy's /healthz: %d", code)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, "haproxy_frontend_http_requests_total") {
		t.Fatalf("HAProxy's /metrics: %d\n%.500s", code, body)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(haproxy_\w+)[{ ]`).FindAllStringSubmatch(body, -1) {
		exported[m[1]] = true
	}
	dashboard, err := os.ReadFile(chartDir + "/dashboards/haproxy-sidecar.json")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, n := range regexp.MustCompile(`haproxy_(?:frontend|backend|server|process)_\w+`).FindAllString(string(dashboard), -1) {
		named = append(named, n)
		if !exported[n] {
			t.Errorf("the dashboard uses %s, which HAProxy %s does not export", n, haproxytest.InstalledVersion(t))
		}
	}
	if len(named) < 5 {
		t.Errorf("the dashboard names %d of HAProxy's metrics: %v", len(named), named)
	}
}
