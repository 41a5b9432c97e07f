package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// httprouteWatch is the --watch list of the Gateway API example, as hack/bench-routes gives it.
var httprouteWatch = []string{"gatewayclasses.v1.gateway.networking.k8s.io;status=off", "gateways.v1.gateway.networking.k8s.io;status=off",
	"httproutes.v1.gateway.networking.k8s.io;status=off", "referencegrants.v1beta1.gateway.networking.k8s.io",
	"namespaces.v1", "services.v1", "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}

// httprouteBenchRoute is hack/bench-routes's HTTPRoute i: host route-i.example.com, each path
// prefix of paths to the Service of the same index in svcs, port 80; created as the bench
// creates them, about 100 a second (the example sorts the routes by creation time).
func httprouteBenchRoute(i int, paths []string, svcs []int) map[string]any {
	var rules []any
	for k, p := range paths {
		rules = append(rules, map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": p}}},
			"backendRefs": []any{map[string]any{"name": fmt.Sprintf("svc-%05d", svcs[k]), "port": 80}}})
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": fmt.Sprintf("route-%05d", i), "namespace": "bench",
			"creationTimestamp": fmt.Sprintf("2026-01-01T00:%02d:%02dZ", i/100/60, i/100%60)},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}},
			"hostnames": []any{fmt.Sprintf("route-%05d.example.com", i)}, "rules": rules}}
}

// httprouteBenchObjects are hack/bench-routes's objects at n HTTPRoutes (route i for host
// route-i.example.com, / to Service i and /api to Service i+1, one ready endpoint each) plus
// extra new routes (route i beyond n: / alone to Service i, created after the others), its
// GatewayClass and Gateway, with the Gateway API example's ConfigMap, decoded as the sources
// convert them; and changes versions of route n/2 as bench-routes's path changes make it (its
// /api made /vC, still to Service i+1), decoded likewise.
func httprouteBenchObjects(tb testing.TB, in config.Inputs, n, extra, changes int) (*snapshot.Objects, []*snapshot.Object) {
	tb.Helper()
	example, err := os.ReadFile("../examples/templates/httproute.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	items := []any{
		map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
			"metadata": map[string]any{"name": "haproxy-sidecar"},
			"spec":     map[string]any{"controllerName": "haproxy-sidecar.io/controller"}},
		map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "gw", "namespace": "bench"},
			"spec": map[string]any{"gatewayClassName": "haproxy-sidecar", "listeners": []any{
				map[string]any{"name": "http", "protocol": "HTTP", "port": 80}}}},
	}
	for i := range n + extra {
		svc := fmt.Sprintf("svc-%05d", i)
		route := httprouteBenchRoute(i, []string{"/", "/api"}, []int{i, (i + 1) % n})
		if i >= n {
			route = httprouteBenchRoute(i, []string{"/"}, []int{i})
		}
		items = append(items, route,
			map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": svc, "namespace": "bench"},
				"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}}}},
			map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
				"metadata":    map[string]any{"name": svc + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svc}},
				"addressType": "IPv4", "ports": []any{map[string]any{"name": "http", "port": 8080, "protocol": "TCP"}},
				"endpoints": []any{map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, "conditions": map[string]any{"ready": true},
					"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": svc + "-pod"}}}})
	}
	decode := func(name string, prefix []byte, items []any) *snapshot.Objects {
		list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		if err != nil {
			tb.Fatal(err)
		}
		objs, err := watcher.DecodeManifests(name, append(prefix, list...), in.Namespace, in.Watch)
		if err != nil {
			tb.Fatal(err)
		}
		return objs
	}
	objs := decode("httproutes.yaml", append(example, "\n---\n"...), items)
	mid := n / 2
	versions := make([]*snapshot.Object, changes)
	for c := range versions {
		route := httprouteBenchRoute(mid, []string{"/", fmt.Sprintf("/v%d", c+1)}, []int{mid, (mid + 1) % n})
		versions[c] = decode("changed.yaml", nil, []any{route}).Resources["httproutes"][0]
	}
	return objs, versions
}

// pathSource gives all objects, route at of httproutes replaced by the version next set last:
// one route's path changed per change, the lists shared as the kube source shares its
// converted objects.
type pathSource struct {
	mu       sync.Mutex
	all      *snapshot.Objects
	at       int
	versions []*snapshot.Object
	next     int // versions given so far
}

func (s *pathSource) Run(ctx context.Context, changed func()) error { <-ctx.Done(); return nil }

func (s *pathSource) Objects(context.Context) (*snapshot.Objects, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return kubeObjects(s.all, func(resource string, list []*snapshot.Object) []*snapshot.Object {
		if resource != "httproutes" || s.next == 0 {
			return list
		}
		routes := append([]*snapshot.Object(nil), list...)
		routes[s.at] = s.versions[s.next-1]
		return routes
	}), nil
}

// change makes the next version of the route the source's; false once there is none left.
func (s *pathSource) change() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == len(s.versions) {
		return false
	}
	s.next++
	return true
}

// BenchmarkSyncPathHTTPRoute3000: one sync of the sidecar's pipeline for a path changed in
// one route (the middle one, as hack/bench-routes changes a path) at 3,000 HTTPRoutes of the
// Gateway API example, as the binary makes it with the kube source: read, decoded, assembled,
// rendered, planned for the runtime API (a map edited), applied to a fake HAProxy 3.4 and
// written as a new generation. No haproxy -c, no object status. Fields as
// BenchmarkSyncNewIngress10000's. -benchtime at most 100x.
func BenchmarkSyncPathHTTPRoute3000(b *testing.B) {
	const n, changes = 3000, 100
	cfg := exampleSyncConfig(b, httprouteWatch)
	all, versions := httprouteBenchObjects(b, cfg.Inputs, n, 0, changes)
	src := &pathSource{all: all, at: n / 2, versions: versions}
	benchSyncChanges(b, syncPipelineFrom(b, cfg, src), src.change, changes)
}

// BenchmarkSyncNewHTTPRoute3000: one sync of the sidecar's pipeline for a new route (an
// HTTPRoute, its Service and EndpointSlice, created after the others) at 3,000 HTTPRoutes of
// the Gateway API example, as BenchmarkSyncPathHTTPRoute3000 makes a path's change: what
// hack/bench-routes times as "a new route to a new Service". -benchtime at most 100x.
func BenchmarkSyncNewHTTPRoute3000(b *testing.B) {
	const n, extra = 3000, 100
	cfg := exampleSyncConfig(b, httprouteWatch)
	all, _ := httprouteBenchObjects(b, cfg.Inputs, n, extra, 0)
	src := &growingSource{all: all, left: extra, grows: []string{"httproutes", "services", "endpointslices"}}
	benchSyncChanges(b, syncPipelineFrom(b, cfg, src), src.next, extra)
}
