package render

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
)

// httprouteSnapshot is what the sidecar renders the Gateway API example
// (examples/templates/httproute.yaml) from with n HTTPRoutes attached to one Gateway, as
// hack/bench-routes makes them: route i for host route-i.example.com, PathPrefix / to Service i
// and PathPrefix /api to Service i+1, each Service with one ready endpoint.
func httprouteSnapshot(tb testing.TB, n int) *snapshot.Snapshot {
	tb.Helper()
	snap := assembleWatched(tb, httprouteObjects(n), httprouteWatch...)
	snap.Templates = loadConfigMapData(tb, "../examples/templates/httproute.yaml")
	snap.TemplateKey = "template"
	snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	return snap
}

// httprouteWatch is the --watch list of the Gateway API example.
var httprouteWatch = []string{"gateways.v1.gateway.networking.k8s.io", "httproutes.v1.gateway.networking.k8s.io", "services.v1",
	"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}

// httprouteObjects are the objects of httprouteSnapshot, by resource name.
func httprouteObjects(n int) map[string][]map[string]any {
	raw := map[string][]map[string]any{
		"gateways": {{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "gw", "namespace": "bench", "generation": int64(1)},
			"spec": map[string]any{"gatewayClassName": "haproxy-sidecar", "listeners": []any{map[string]any{
				"name": "http", "protocol": "HTTP", "port": int64(80), "allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "Same"}}}}}}},
	}
	for i := 0; i < n; i++ {
		raw["httproutes"] = append(raw["httproutes"], benchRoute(i, benchRule("/", i), benchRule("/api", (i+1)%n)))
		raw["services"] = append(raw["services"], benchService(i))
		raw["endpointslices"] = append(raw["endpointslices"], benchSlice(i))
	}
	return raw
}

func benchSvcName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// benchRule is a rule of a bench route: PathPrefix p to Service i, port 80.
func benchRule(p string, i int) any {
	return map[string]any{"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": p}}},
		"backendRefs": []any{map[string]any{"name": benchSvcName(i), "port": int64(80)}}}
}

// benchRoute is HTTPRoute route-i for host route-i.example.com, attached to Gateway gw.
func benchRoute(i int, rules ...any) map[string]any {
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": fmt.Sprintf("route-%05d", i), "namespace": "bench", "generation": int64(1)},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}},
			"hostnames": []any{fmt.Sprintf("route-%05d.example.com", i)},
			"rules":     rules}}
}

// benchService is Service i (port 80, named http, to 8080).
func benchService(i int) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": benchSvcName(i), "namespace": "bench"},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}}}}
}

// benchSlice is Service i's EndpointSlice: one ready endpoint.
func benchSlice(i int) map[string]any {
	return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": benchSvcName(i) + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": benchSvcName(i)}},
		"addressType": "IPv4",
		"ports":       []any{map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP"}},
		"endpoints": []any{map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, "conditions": map[string]any{"ready": true},
			"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": benchSvcName(i) + "-pod"}}}}
}

// TestHTTPRouteSnapshotRendersTheRoutes: the benchmark's snapshot renders what bench-routes
// serves (a backend per Service, two prefixes per route), so that the benchmark measures the
// real work.
func TestHTTPRouteSnapshotRendersTheRoutes(t *testing.T) {
	b, err := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}).Render(context.Background(), httprouteSnapshot(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b.Config), "\nbackend be_bench_"); got != 10 {
		t.Errorf("%d backends, want 10:\n%s", got, b.Config)
	}
	routes := string(b.Maps["routes.map"])
	for _, want := range []string{"fe_80@route-00003.example.com/ be_bench_svc-00003_80", "fe_80@route-00003.example.com/api/ be_bench_svc-00004_80"} {
		if !strings.Contains(routes, want+"\n") {
			t.Errorf("routes.map has no line %q:\n%s", want, routes)
		}
	}
}

// BenchmarkRenderHTTPRoute: the Gateway API example with 1,000 and 3,000 HTTPRoutes and
// Services, the render of one sync (haproxy.cfg and the maps, the routes computed once and
// shared): docs/performance.md.
func BenchmarkRenderHTTPRoute(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := httprouteSnapshot(b, n)
			r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
			out, err := r.Render(context.Background(), s) // compile outside the loop
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out.Config) + len(out.Maps["routes.map"])))
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				if _, err := r.Render(context.Background(), s); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}
