package render

// Benchmarks of the default template with 1,000 and 10,000 services, 10 ready pods each
// (pods as ToUnstructured gives them, trimmed to typical fields), 1 port per service; the pods
// as records (what the sidecar's snapshot holds) and as plain maps. 10,000 x 10 is ~6.1 MB of
// haproxy.cfg. The numbers, before and after the template engine's rewrite, and where the time
// goes: docs/performance.md.

import (
	"context"
	"fmt"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// benchPod is a ready pod as runtime.DefaultUnstructuredConverter.ToUnstructured gives it
// (nested map[string]any, []any, int64, string, bool), trimmed to typical fields.
func benchPod(svc string, i int) map[string]any {
	name := fmt.Sprintf("%s-%d", svc, i)
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":            name,
			"namespace":       "web",
			"uid":             "0b3d7d3e-6a5f-4c1e-9d7e-" + fmt.Sprintf("%012d", i),
			"resourceVersion": "123456",
			"labels":          map[string]any{"app": svc, "pod-template-hash": "5d9c7b8f6d"},
		},
		"spec": map[string]any{
			"nodeName": "node-1",
			"containers": []any{map[string]any{
				"name":  "app",
				"image": "registry.example.com/app:1.2.3",
				"ports": []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}},
			}},
		},
		"status": map[string]any{
			"phase":  "Running",
			"podIP":  fmt.Sprintf("10.%d.%d.%d", i, (len(svc)*7)%250, (len(svc)*13)%250),
			"podIPs": []any{map[string]any{"ip": "10.0.0.1"}},
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True"},
				map[string]any{"type": "ContainersReady", "status": "True"},
			},
			"containerStatuses": []any{map[string]any{"name": "app", "ready": true, "restartCount": int64(0)}},
		},
	}
}

// benchSnapshot builds the snapshot: with pods as records (asRecords), as the sidecar's
// snapshot has them, or as plain maps, as a hand-made snapshot may.
func benchSnapshot(services, pods int, asRecords bool) *snapshot.Snapshot {
	var shapes record.Shapes
	s := &snapshot.Snapshot{
		Env:          map[string]string{},
		Stats:        snapshot.Stats{Username: "stats", Password: "secret", PasswordSet: true},
		Certificates: []snapshot.Certificate{{Name: "example", PEM: []byte("pem")}},
	}
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc%05d", i)
		svc := map[string]any{
			"name":      name,
			"namespace": "web",
			"selector":  map[string]any{"app": name},
			"hostnames": []any{name + ".example.com", "www." + name + ".example.com"},
			"ports":     []any{int64(8080)},
			"ssl":       i%2 == 0,
		}
		if i%10 == 0 {
			svc["path"] = "^/api/"
		}
		podMap := make(map[string]any, pods)
		for p := 0; p < pods; p++ {
			pod := benchPod(name, p)
			podMap[pod["metadata"].(map[string]any)["name"].(string)] = pod
		}
		svc["pods"] = podMap
		if asRecords {
			for name, pod := range podMap {
				podMap[name] = record.Of(&shapes, pod)
			}
			svc["pods"] = record.FromMap(nil, podMap) // pod names are data: a key list of its own
		}
		s.Services = append(s.Services, serviceRecord(svc))
	}
	return s
}

func benchRender(b *testing.B, services int) {
	b.Run("records", func(b *testing.B) { benchRenderOf(b, benchSnapshot(services, 10, true)) })
	b.Run("maps", func(b *testing.B) { benchRenderOf(b, benchSnapshot(services, 10, false)) })
}

func benchRenderOf(b *testing.B, s *snapshot.Snapshot) {
	r := New(Options{SSLDir: "/etc/haproxy/ssl"})
	// A render from scratch: a renderer that keeps nothing from one render to the next (one
	// that does reuses the loops' iterations: BenchmarkRenderDefault10000PodChange).
	r.unshared = true
	out, err := r.Render(context.Background(), s) // compile outside the loop
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out.Config)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Render(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderDefault1000(b *testing.B)  { benchRender(b, 1000) }
func BenchmarkRenderDefault10000(b *testing.B) { benchRender(b, 10000) }
