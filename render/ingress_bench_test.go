package render

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// ingressSnapshot is what the sidecar renders the Ingress example (examples/templates/ingress.yaml)
// from with n Ingresses, as hack/bench-ingress makes them: Ingress i for host ing-i.example.com,
// Prefix / to Service i and Prefix /api to Service i+1, each Service with one ready endpoint.
func ingressSnapshot(tb testing.TB, n int) *snapshot.Snapshot {
	tb.Helper()
	snap := assembleWatched(tb, ingressObjects(n), ingressWatch...)
	snap.Templates = loadConfigMapData(tb, "../examples/templates/ingress.yaml")
	snap.TemplateKey = "template"
	snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	return snap
}

// ingressWatch is the --watch list of the Ingress example.
var ingressWatch = []string{"ingresses.v1.networking.k8s.io", "services.v1",
	"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}

// ingressObjects are the objects of ingressSnapshot, by resource name.
func ingressObjects(n int) map[string][]map[string]any {
	svc := func(i int) string { return fmt.Sprintf("svc-%04d", i) }
	path := func(p string, i int) any { return benchIngressPath(p, svc(i)) }
	raw := map[string][]map[string]any{}
	for i := 0; i < n; i++ {
		raw["ingresses"] = append(raw["ingresses"], benchIngress(fmt.Sprintf("ing-%04d", i), "haproxy-sidecar", path("/", i), path("/api", (i+1)%n)))
		raw["services"] = append(raw["services"], map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": svc(i), "namespace": "bench"},
			"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}}}})
		raw["endpointslices"] = append(raw["endpointslices"], map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata":    map[string]any{"name": svc(i) + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svc(i)}},
			"addressType": "IPv4",
			"ports":       []any{map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP"}},
			"endpoints": []any{map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, "conditions": map[string]any{"ready": true},
				"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": svc(i) + "-pod"}}}})
	}
	return raw
}

// benchIngress is the Ingress name of class in namespace bench, for host NAME.example.com,
// with paths; its uid is random hex as in a cluster (benchUID).
func benchIngress(name, class string, paths ...any) map[string]any {
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": name, "namespace": "bench", "uid": benchUID(name)},
		"spec": map[string]any{"ingressClassName": class, "rules": []any{map[string]any{
			"host": name + ".example.com", "http": map[string]any{"paths": paths}}}}}
}

// benchIngressPath is a Prefix path p to Service svc, port http.
func benchIngressPath(p, svc string) any {
	return map[string]any{"path": p, "pathType": "Prefix", "backend": map[string]any{
		"service": map[string]any{"name": svc, "port": map[string]any{"name": "http"}}}}
}

// benchUID is a uid for the object name, as the API server gives (random hex, UUID form),
// but the same at each run: the hash of name.
func benchUID(name string) string {
	h := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// TestIngressSnapshotRendersTheRoutes: the benchmark's snapshot renders what bench-ingress
// serves (a backend per Service, three routes per Ingress), so that the benchmark measures
// the real work.
func TestIngressSnapshotRendersTheRoutes(t *testing.T) {
	b, err := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}).Render(context.Background(), ingressSnapshot(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b.Config), "\nbackend be_bench_"); got != 10 {
		t.Errorf("%d backends, want 10:\n%s", got, b.Config)
	}
	if !strings.Contains(string(b.Config), "server svc-0003-pod-8080 10.1.0.4:8080") {
		t.Errorf("no server for svc-0003:\n%s", b.Config)
	}
	routes := string(b.Maps["routes.map"])
	for _, want := range []string{"ing-0003.example.com/ be_bench_svc-0003_http", "ing-0003.example.com/api/ be_bench_svc-0004_http", "ing-0003.example.com/api? be_bench_svc-0004_http"} {
		if !strings.Contains(routes, want+"\n") {
			t.Errorf("routes.map has no line %q:\n%s", want, routes)
		}
	}
}

// BenchmarkRenderIngress1000: the Ingress example with 1,000 Ingresses and Services, the
// render of one sync (haproxy.cfg and routes.map, the routes computed once and shared):
// docs/performance.md.
func BenchmarkRenderIngress1000(b *testing.B) {
	s := ingressSnapshot(b, 1000)
	r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
	out, err := r.Render(context.Background(), s) // compile outside the loop
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out.Config) + len(out.Maps["routes.map"])))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIngressExampleRendersAsAFreshRenderer: the Ingress example, rendered by one renderer
// through a sequence of changes (endpoints added, made not ready and readdressed; an Ingress's
// path changed; a Service's port renamed; a Service deleted and added back), renders each step
// byte for byte as a new renderer does; after an endpoints change, the backends of the other
// Services are written as they were (their loop's iterations kept), and after an Ingress's
// change all but its own (a backend's body reads its Service and EndpointSlices by key).
func TestIngressExampleRendersAsAFreshRenderer(t *testing.T) {
	const n = 40
	raw := ingressObjects(n)
	tpl := loadConfigMapData(t, "../examples/templates/ingress.yaml")
	line := lineOf(t, tpl["template"], "{%- for name, (service_ns, service, service_port) in r.backends %}")
	opts := Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}
	kept := New(opts)
	slice := func(i int, edit func(ep map[string]any)) {
		s := deepCopy(raw["endpointslices"][i]).(map[string]any)
		edit(s["endpoints"].([]any)[0].(map[string]any))
		raw["endpointslices"][i] = s
	}
	for step, c := range []struct {
		what      string
		change    func()
		endpoints bool // only endpoints changed: the other backends are written as they were
	}{
		{"start", func() {}, false},
		{"the same again", func() {}, true},
		{"an endpoint added", func() {
			raw["endpointslices"][3] = secondEndpoint(map[string][]map[string]any{"endpointslices": {raw["endpointslices"][3]}})
		}, true},
		{"an endpoint not ready", func() { slice(7, func(ep map[string]any) { ep["conditions"] = map[string]any{"ready": false} }) }, true},
		{"an endpoint readdressed", func() { slice(7, func(ep map[string]any) { ep["addresses"] = []any{"10.9.9.7"} }) }, true},
		{"a path changed", func() {
			ing := deepCopy(raw["ingresses"][5]).(map[string]any)
			ing["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)["http"].(map[string]any)["paths"].([]any)[1].(map[string]any)["path"] = "/v2"
			raw["ingresses"][5] = ing
		}, false},
		{"a Service's port renamed", func() {
			svc := deepCopy(raw["services"][9]).(map[string]any)
			svc["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["name"] = "web"
			raw["services"][9] = svc
		}, false},
		{"a Service deleted", func() { raw["services"] = append(raw["services"][:12:12], raw["services"][13:]...) }, false},
		{"an endpoint added again", func() {
			raw["endpointslices"][20] = secondEndpoint(map[string][]map[string]any{"endpointslices": {raw["endpointslices"][20]}})
		}, true},
	} {
		c.change()
		snap := assembleWatched(t, raw, ingressWatch...)
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		before := kept.kept.BodiesReusedAt("template", line)
		got, err := kept.Render(context.Background(), snap)
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, c.what, err)
		}
		want, err := renderFresh(opts, snap)
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, c.what, err)
		}
		if d := bundleDiff(got, want); d != "" {
			t.Fatalf("step %d (%s): the kept renderer renders otherwise than a fresh one: %s", step, c.what, d)
		}
		backends := strings.Count(string(got.Config), "\nbackend be_") - 1 // be_notfound
		if reused := kept.kept.BodiesReusedAt("template", line) - before; (c.endpoints || c.what == "a path changed") && reused < backends-2 {
			t.Errorf("step %d (%s): %d of %d backends written as they were, want all but the changed one's", step, c.what, reused, backends)
		}
	}
}
