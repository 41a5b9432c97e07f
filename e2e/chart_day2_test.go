package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// nested returns the value at path in obj (nil when absent), for assertions on rendered objects.
func nested(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}

// num is a rendered number (YAML and JSON decoding give int64 or float64).
func num(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return -1
}

// TestChartDrain: a pod told to stop drains (docs/kubernetes.md#draining): the sidecar's /readyz
// turns 503 for HAProxy's preStop sleep, the kubelet probes it often enough to see it within
// that sleep, HAProxy then stops softly within hard-stop-after, and the grace period covers the
// three. The chart's hard-stop-after is the one of the templates it ships and documents.
func TestChartDrain(t *testing.T) {
	helm := helmBin(t)
	for _, tc := range []struct {
		set                    []string
		preStop, hardStop, tgp int
	}{
		{nil, 10, 30, 50},
		{[]string{"--set", "drain.preStopSeconds=20,drain.hardStopAfterSeconds=60,drain.marginSeconds=5"}, 20, 60, 85},
	} {
		spec := podSpec(t, helmTemplate(t, helm, "lb", "lb", tc.set...))
		hap, side := container(t, spec, "haproxy"), container(t, spec, "sidecar")
		if got := num(nested(spec, "terminationGracePeriodSeconds")); got != int64(tc.tgp) {
			t.Errorf("%v: terminationGracePeriodSeconds %v, want %d", tc.set, got, tc.tgp)
		}
		if got := toJSON(t, nested(hap, "lifecycle", "preStop")); got != `{"exec":{"command":["sleep","`+strconv.Itoa(tc.preStop)+`"]}}` {
			t.Errorf("%v: HAProxy's preStop %s, want a sleep of %d s", tc.set, got, tc.preStop)
		}
		env := envOf(side)
		if env["HAPROXY_SIDECAR_SHUTDOWN_DELAY"] != strconv.Itoa(tc.preStop)+"s" {
			t.Errorf("%v: the sidecar's shutdown delay %q, want the preStop sleep (%d s): /readyz 503 while HAProxy serves", tc.set, env["HAPROXY_SIDECAR_SHUTDOWN_DELAY"], tc.preStop)
		}
		if env["HARD_STOP_AFTER"] != strconv.Itoa(tc.hardStop)+"s" || !strings.Contains(env["HAPROXY_SIDECAR_ENV_ALLOW"], "HARD_STOP_AFTER") {
			t.Errorf("%v: HARD_STOP_AFTER %q (allowed: %q), want %ds for the template", tc.set, env["HARD_STOP_AFTER"], env["HAPROXY_SIDECAR_ENV_ALLOW"], tc.hardStop)
		}
		probe, _ := nested(side, "readinessProbe").(map[string]any)
		if period, fails := num(probe["periodSeconds"]), num(probe["failureThreshold"]); period*fails >= int64(tc.preStop) {
			t.Errorf("%v: the sidecar's readiness is seen failing after %d x %d s, not within the preStop sleep of %d s", tc.set, period, fails, tc.preStop)
		}
		script := toJSON(t, hap["args"])
		if strings.Contains(script, "exec haproxy") || !strings.Contains(script, `kill -USR1`) {
			t.Errorf("%v: HAProxy is not run under a shell that turns the stop signal into a soft stop: %s", tc.set, script)
		}
	}

	t.Run("examples/kubernetes drains as the chart", func(t *testing.T) {
		b, err := os.ReadFile("../examples/kubernetes/deployment.yaml")
		if err != nil {
			t.Fatal(err)
		}
		example, chart := podSpec(t, decodeDocs(t, b)), podSpec(t, helmTemplate(t, helm, "lb", "lb"))
		for _, path := range [][]string{{"terminationGracePeriodSeconds"}} {
			if e, c := num(nested(example, path...)), num(nested(chart, path...)); e != c {
				t.Errorf("%v: the example's %d, the chart's %d", path, e, c)
			}
		}
		eh, ch := container(t, example, "haproxy"), container(t, chart, "haproxy")
		for _, field := range []string{"args", "lifecycle"} {
			if e, c := toJSON(t, eh[field]), toJSON(t, ch[field]); e != c {
				t.Errorf("HAProxy's %s: the example's %s, the chart's %s", field, e, c)
			}
		}
		if e, c := envOf(container(t, example, "sidecar"))["HAPROXY_SIDECAR_SHUTDOWN_DELAY"], envOf(container(t, chart, "sidecar"))["HAPROXY_SIDECAR_SHUTDOWN_DELAY"]; e != c {
			t.Errorf("the sidecar's shutdown delay: the example's %q, the chart's %q", e, c)
		}
	})
	t.Run("the templates' hard-stop-after", func(t *testing.T) {
		for file, re := range map[string]string{
			"../templates/default.cfg.j2":        `hard-stop-after \{\{ env.HARD_STOP_AFTER\|default\("(\d+)s", true\) \}\}`,
			"../examples/kubernetes/config.yaml": `hard-stop-after (\d+)s`,
		} {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(re).FindSubmatch(b)
			if m == nil || string(m[1]) != "30" {
				t.Errorf("%s: hard-stop-after %q, want the chart's drain.hardStopAfterSeconds (30)", file, m)
			}
		}
	})
}

// TestChartNames: nameOverride and fullnameOverride name the objects; the inputs, the stats
// Secret, the leader-election Lease and the dashboard are the release's own by default, so that
// two releases in one namespace share nothing; inputs.* still names them.
func TestChartNames(t *testing.T) {
	helm := helmBin(t)
	objs := helmTemplate(t, helm, "lb", "lb", "--set", "fullnameOverride=edge,leaderElection.enabled=true,dashboards.enabled=true,services.shop.namespace=shop,services.shop.selector.app=shop")
	for kind, name := range map[string]string{"Deployment": "edge", "ServiceAccount": "edge", "Service": "edge", "Role": "edge", "ConfigMap": "edge-services"} {
		if len(find(objs, kind, name)) != 1 {
			t.Errorf("fullnameOverride=edge: no %s %s", kind, name)
		}
	}
	env := envOf(container(t, podSpec(t, objs), "sidecar"))
	for k, v := range map[string]string{"HAPROXY_SIDECAR_SERVICES_CONFIGMAP": "edge-services", "HAPROXY_SIDECAR_CONFIG_CONFIGMAP": "edge-config",
		"HAPROXY_SIDECAR_CERTIFICATES_CONFIGMAP": "edge-certificates", "HAPROXY_SIDECAR_KEYS_SECRET": "edge-keys", "HAPROXY_SIDECAR_LEADER_ELECTION_ID": "edge"} {
		if env[k] != v {
			t.Errorf("fullnameOverride=edge: %s = %q, want %q", k, env[k], v)
		}
	}
	if js := toJSON(t, podSpec(t, objs)); !strings.Contains(js, `"secretKeyRef":{"key":"password","name":"edge-stats","optional":true}`) {
		t.Errorf("the stats password Secret is not the release's: %s", js)
	}
	if js := toJSON(t, find(objs, "Role", "edge")[0].Object); !strings.Contains(js, `"resourceNames":["edge-services"]`) {
		t.Errorf("the services ConfigMap the sidecar may patch: %s", js)
	}

	objs = helmTemplate(t, helm, "lb", "lb", "--set", "nameOverride=proxy")
	d := find(objs, "Deployment", "lb-proxy")
	if len(d) != 1 || d[0].GetLabels()["app.kubernetes.io/name"] != "proxy" {
		t.Fatalf("nameOverride=proxy: want Deployment lb-proxy labelled app.kubernetes.io/name=proxy, got %v", find(objs, "Deployment", ""))
	}
	if sel := toJSON(t, nested(d[0].Object, "spec", "selector")); !strings.Contains(sel, `"app.kubernetes.io/name":"proxy"`) {
		t.Errorf("nameOverride=proxy: selector %s", sel)
	}

	t.Run("two releases by default", func(t *testing.T) {
		a := helmTemplate(t, helm, "a", "lb", "--set", "leaderElection.enabled=true,dashboards.enabled=true,services.shop.namespace=shop,services.shop.selector.app=shop,template=global")
		b := helmTemplate(t, helm, "b", "lb", "--set", "leaderElection.enabled=true,dashboards.enabled=true,services.shop.namespace=shop,services.shop.selector.app=shop,template=global")
		ea, eb := envOf(container(t, podSpec(t, a), "sidecar")), envOf(container(t, podSpec(t, b), "sidecar"))
		for k, v := range ea {
			if strings.HasPrefix(k, "HAPROXY_SIDECAR_") && strings.Contains(k, "_CONFIGMAP") || strings.HasSuffix(k, "_SECRET") || strings.HasSuffix(k, "ELECTION_ID") {
				if eb[k] == v {
					t.Errorf("both releases' sidecars read %s=%q", k, v)
				}
			}
		}
		if ua, ub := dashboardOf(t, a)["uid"], dashboardOf(t, b)["uid"]; ua == ub || ua == "haproxy-sidecar" {
			t.Errorf("the dashboards' uids %v and %v: want one of each release's", ua, ub)
		}
		if ta, tb := dashboardOf(t, a)["title"], dashboardOf(t, b)["title"]; ta == tb {
			t.Errorf("the dashboards' titles %v and %v: Grafana keeps one title per folder", ta, tb)
		}
	})
	t.Run("dashboards.uid", func(t *testing.T) {
		if uid := dashboardOf(t, helmTemplate(t, helm, "lb", "lb", "--set", "dashboards.enabled=true,dashboards.uid=edge-lb"))["uid"]; uid != "edge-lb" {
			t.Errorf("uid %v, want edge-lb", uid)
		}
	})
}

// dashboardOf is the Grafana dashboard of the rendered objects.
func dashboardOf(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	for _, cm := range find(objs, "ConfigMap", "") {
		if js, ok, _ := unstructured.NestedString(cm.Object, "data", "haproxy-sidecar.json"); ok {
			var d map[string]any
			if err := json.Unmarshal([]byte(js), &d); err != nil {
				t.Fatalf("the dashboard is not JSON: %v", err)
			}
			return d
		}
	}
	t.Fatal("no dashboard ConfigMap")
	return nil
}

// TestChartPodValues: ports, the image digest, HAProxy's memory limit and probes.
func TestChartPodValues(t *testing.T) {
	helm := helmBin(t)
	t.Run("ports", func(t *testing.T) {
		objs := helmTemplate(t, helm, "lb", "lb", "--set", "ports.http=8000,ports.https=8443,ports.haproxyMetrics=18405,ports.health=18080,ports.metrics=19090,serviceMonitor.enabled=true")
		spec := podSpec(t, objs)
		hap, side := container(t, spec, "haproxy"), container(t, spec, "sidecar")
		if js := toJSON(t, hap["ports"]); js != `[{"containerPort":8000,"name":"http"},{"containerPort":8443,"name":"https"},{"containerPort":18405,"name":"haproxy-metrics"}]` {
			t.Errorf("HAProxy's ports %s", js)
		}
		if js := toJSON(t, side["ports"]); js != `[{"containerPort":18080,"name":"health"},{"containerPort":19090,"name":"metrics"}]` {
			t.Errorf("the sidecar's ports %s", js)
		}
		env := envOf(side)
		for k, v := range map[string]string{"HTTP_BIND": ":8000", "HTTPS_BIND": ":8443", "METRICS_BIND": ":18405",
			"HAPROXY_SIDECAR_HEALTH_ADDR": ":18080", "HAPROXY_SIDECAR_METRICS_ADDR": ":19090"} {
			if env[k] != v {
				t.Errorf("%s = %q, want %q", k, env[k], v)
			}
		}
		if allow := env["HAPROXY_SIDECAR_ENV_ALLOW"]; !strings.Contains(allow, "HTTP_BIND") || !strings.Contains(allow, "METRICS_BIND") {
			t.Errorf("the template may not read the binds: --env-allow %q", allow)
		}
		if js := toJSON(t, nested(find(objs, "Service", "lb-metrics")[0].Object, "spec", "ports")); !strings.Contains(js, `"port":19090`) || !strings.Contains(js, `"port":18405`) {
			t.Errorf("the metrics Service's ports %s", js)
		}
		out, err := exec.Command(helm, "template", "lb", chartDir, "--set", "ports.http=8080").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "must differ") {
			t.Errorf("ports.http=ports.health: %v\n%s", err, out)
		}
	})
	t.Run("image.digest", func(t *testing.T) {
		digest := "sha256:" + strings.Repeat("ab", 32)
		spec := podSpec(t, helmTemplate(t, helm, "lb", "lb", "--set", "image.repository=registry.example/hs,image.tag=1.2.3,image.digest="+digest))
		for _, name := range []string{"haproxy", "sidecar"} {
			if img := container(t, spec, name)["image"]; img != "registry.example/hs:1.2.3@"+digest {
				t.Errorf("%s runs %v, want the digest pinned", name, img)
			}
		}
		if out, err := exec.Command(helm, "template", "lb", chartDir, "--set", "image.digest=latest").CombinedOutput(); err == nil {
			t.Errorf("image.digest=latest accepted:\n%.300s", out)
		}
	})
	t.Run("HAProxy's memory limit and probes", func(t *testing.T) {
		hap := container(t, podSpec(t, helmTemplate(t, helm, "lb", "lb")), "haproxy")
		if nested(hap, "resources", "limits", "memory") == nil {
			t.Error("HAProxy has no memory limit")
		}
		for _, probe := range []string{"livenessProbe", "startupProbe", "readinessProbe"} {
			if js := toJSON(t, hap[probe]); !strings.Contains(js, `"tcpSocket":{"port":"http"}`) {
				t.Errorf("HAProxy's %s %s: want a TCP check of its HTTP port (no haproxy -c; open through a reload)", probe, js)
			}
		}
		hap = container(t, podSpec(t, helmTemplate(t, helm, "lb", "lb", "--set", "haproxy.livenessProbe=null,haproxy.resources.limits.memory=2Gi")), "haproxy")
		if hap["livenessProbe"] != nil || nested(hap, "resources", "limits", "memory") != "2Gi" {
			t.Errorf("livenessProbe=null and a 2Gi limit: %v %v", hap["livenessProbe"], nested(hap, "resources", "limits"))
		}
	})
}

// TestChartScrapesOnce: the pods are scraped one way: the prometheus.io annotations, or the
// ServiceMonitor (the sidecar's metrics and HAProxy's exporter); HAProxy's exporter goes with
// haproxyMetrics; the alerts tell the sidecar's target apart.
func TestChartScrapesOnce(t *testing.T) {
	helm := helmBin(t)
	annotations := func(objs []*unstructured.Unstructured) map[string]string {
		a, _, _ := unstructured.NestedStringMap(find(objs, "Deployment", "")[0].Object, "spec", "template", "metadata", "annotations")
		return a
	}
	def := helmTemplate(t, helm, "lb", "lb", "--set", "podAnnotations.team=edge")
	if a := annotations(def); a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "9090" || a["team"] != "edge" {
		t.Errorf("by default: annotations %v, want the sidecar's scrape annotations and podAnnotations", a)
	}
	sm := helmTemplate(t, helm, "lb", "lb", "--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,podAnnotations.team=edge")
	if a := annotations(sm); a["prometheus.io/scrape"] != "" || a["team"] != "edge" {
		t.Errorf("with the ServiceMonitor: annotations %v, want no scrape annotations (each pod scraped twice)", a)
	}
	if js := toJSON(t, nested(find(sm, "ServiceMonitor", "lb")[0].Object, "spec", "endpoints")); !strings.Contains(js, `"port":"metrics"`) || !strings.Contains(js, `"port":"haproxy-metrics"`) {
		t.Errorf("the ServiceMonitor's endpoints %s: want the sidecar's and HAProxy's", js)
	}
	rules := toJSON(t, find(sm, "PrometheusRule", "lb")[0].Object)
	if !strings.Contains(rules, `up{namespace=\"lb\", pod=~\"lb-[a-z0-9]+-[a-z0-9]+\", endpoint=\"metrics\"} == 0`) || !strings.Contains(rules, `absent(up{namespace=\"lb\", pod=~\"lb-[a-z0-9]+-[a-z0-9]+\", endpoint=\"metrics\"})`) {
		t.Errorf("the rules do not watch the sidecar's up: %s", rules)
	}
	if a := annotations(helmTemplate(t, helm, "lb", "lb", "--set", "scrapeAnnotations=false")); a["prometheus.io/scrape"] != "" {
		t.Errorf("scrapeAnnotations=false: %v", a)
	}
	off := helmTemplate(t, helm, "lb", "lb", "--set", "haproxyMetrics.enabled=false,serviceMonitor.enabled=true")
	if js := toJSON(t, off); strings.Contains(js, "haproxy-metrics") || strings.Contains(js, "METRICS_BIND") {
		t.Error("haproxyMetrics.enabled=false still serves or scrapes HAProxy's exporter")
	}
}
