package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/quarantine"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// routesWatch is the --watch list of the HTTPRoute example, as hack/bench-routes gives it.
var routesWatch = []string{"gatewayclasses.v1.gateway.networking.k8s.io;status=off", "gateways.v1.gateway.networking.k8s.io;status=off",
	"httproutes.v1.gateway.networking.k8s.io;status=off", "referencegrants.v1beta1.gateway.networking.k8s.io",
	"namespaces.v1", "services.v1", "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}

// routesObjects are hack/bench-routes's objects at n HTTPRoutes (the GatewayClass, a Gateway
// bench/gw, route i for host route-i.example.com, PathPrefix / to Service i and /api to
// Service i+1, one ready endpoint each), and extra, with the config ConfigMap example (the
// HTTPRoute example's, by default), as the file source reads them.
func routesObjects(tb testing.TB, in config.Inputs, n int, example []byte, extra ...any) *snapshot.Objects {
	tb.Helper()
	if example == nil {
		var err error
		if example, err = os.ReadFile("../examples/templates/httproute.yaml"); err != nil {
			tb.Fatal(err)
		}
	}
	svc := func(i int) string { return fmt.Sprintf("svc-%05d", i) }
	rule := func(p string, i int) any {
		return map[string]any{"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": p}}},
			"backendRefs": []any{map[string]any{"name": svc(i), "port": 80}}}
	}
	items := []any{
		map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": map[string]any{"name": "haproxy-sidecar"},
			"spec": map[string]any{"controllerName": "haproxy-sidecar.io/controller"}},
		map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": map[string]any{"name": "gw", "namespace": "bench"},
			"spec": map[string]any{"gatewayClassName": "haproxy-sidecar", "listeners": []any{map[string]any{"name": "http", "protocol": "HTTP", "port": 80}}}},
	}
	for i := range n {
		items = append(items,
			map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
				"metadata": map[string]any{"name": fmt.Sprintf("route-%05d", i), "namespace": "bench"},
				"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}}, "hostnames": []any{fmt.Sprintf("route-%05d.example.com", i)},
					"rules": []any{rule("/", i), rule("/api", (i+1)%n)}}},
			map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": svc(i), "namespace": "bench"},
				"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}}}},
			map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
				"metadata":    map[string]any{"name": svc(i) + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svc(i)}},
				"addressType": "IPv4", "ports": []any{map[string]any{"name": "http", "port": 8080, "protocol": "TCP"}},
				"endpoints": []any{map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, "conditions": map[string]any{"ready": true}}}})
	}
	items = append(items, extra...)
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		tb.Fatal(err)
	}
	objs, err := watcher.DecodeManifests("routes.yaml", append(append(example, "\n---\n"...), list...), in.Namespace, in.Watch)
	if err != nil {
		tb.Fatal(err)
	}
	return objs
}

// BenchmarkFirstMakeHTTPRoute: what the sidecar's first sync makes at 3,000 HTTPRoutes before
// its first configuration, in process: the HTTPRoute example rendered with a new renderer, its
// tests in the config run (each a render beside the cluster's objects), no haproxy -c (the
// tests' valid: true not checked); no-tests: the example without its tests. cpu-ms/op is the
// process's CPU time (docs/performance.md, the start at 3,000 HTTPRoutes).
func BenchmarkFirstMakeHTTPRoute(b *testing.B) {
	cfg := routesConfig(b)
	in := cfg.Inputs
	dirs, err := onceDirs(cfg)
	if err != nil {
		b.Fatal(err)
	}
	example, err := os.ReadFile("../examples/templates/httproute.yaml")
	if err != nil {
		b.Fatal(err)
	}
	// The tests are the ConfigMap's last keys: without them, what the first configuration
	// costs by itself.
	at := bytes.Index(example, []byte("\n  tests."))
	if at < 0 {
		b.Fatal("the example has no tests")
	}
	for _, tc := range []struct {
		name    string
		example []byte
		tests   int
	}{{"tests", example, 6}, {"no-tests", example[:at+1], 0}} {
		b.Run(tc.name, func(b *testing.B) {
			objs := routesObjects(b, in, 3000, tc.example)
			b.ReportAllocs()
			cpu := benchCPU()
			for b.Loop() {
				build, cleanup, err := stagingBuilder(in, snapshot.PeersOptions{}, cfg.Render, dirs)
				if err != nil {
					b.Fatal(err)
				}
				made := build.Make(context.Background(), objs, build.Decode(objs), &quarantine.State{}, nil, true)
				cleanup()
				if made.Err != nil || made.Candidate == nil || len(made.Candidate.Tests) != tc.tests {
					b.Fatalf("%v %+v", made.Err, made.Candidate)
				}
			}
			b.ReportMetric(float64(benchCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// benchCPU is the CPU time the process used so far (user and system, every thread).
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// routesConfig is validate's configuration with the HTTPRoute example's --watch list, without
// haproxy -c.
func routesConfig(tb testing.TB) *config.Once {
	tb.Helper()
	args := []string{"--dir", tb.TempDir(), "--validate=false"}
	for _, w := range routesWatch {
		args = append(args, "--watch", w)
	}
	cfg, err := config.ParseOnce("validate", args, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}
