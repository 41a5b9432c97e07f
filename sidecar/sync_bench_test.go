package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/apply"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/generation"
	"github.com/haproxy-sidecar/haproxy-sidecar/reload/haproxy/runtimeapi"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/config"
	"github.com/haproxy-sidecar/haproxy-sidecar/sidecar/pipeline"
	"github.com/haproxy-sidecar/haproxy-sidecar/watcher"
)

// ingressWatch is the --watch list of the Ingress example, as hack/bench-routes gives it.
var ingressWatch = []string{"ingresses.v1.networking.k8s.io", "services.v1",
	"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}

// ingressBenchObjects are hack/bench-routes's objects at n Ingresses plus extra new routes
// (Ingress i for host ing-i.example.com, / to Service i and /api to Service i+1 for i < n, /
// alone to Service i beyond, one ready endpoint each), with the Ingress example's ConfigMap,
// decoded as the sources convert them: each list in name order.
func ingressBenchObjects(tb testing.TB, in config.Inputs, n, extra int) *snapshot.Objects {
	tb.Helper()
	example, err := os.ReadFile("../examples/templates/ingress.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	svc := func(i int) string { return fmt.Sprintf("svc-%05d", i) }
	path := func(p string, i int) any {
		return map[string]any{"path": p, "pathType": "Prefix", "backend": map[string]any{
			"service": map[string]any{"name": svc(i), "port": map[string]any{"name": "http"}}}}
	}
	var items []any
	for i := range n + extra {
		paths := []any{path("/", i), path("/api", (i+1)%n)}
		if i >= n {
			paths = paths[:1]
		}
		items = append(items,
			map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
				"metadata": map[string]any{"name": fmt.Sprintf("ing-%05d", i), "namespace": "bench"},
				"spec": map[string]any{"ingressClassName": "haproxy-sidecar", "rules": []any{map[string]any{
					"host": fmt.Sprintf("ing-%05d.example.com", i), "http": map[string]any{"paths": paths}}}}},
			map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": svc(i), "namespace": "bench"},
				"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80, "targetPort": 8080}}}},
			map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
				"metadata":    map[string]any{"name": svc(i) + "-abcde", "namespace": "bench", "labels": map[string]any{"kubernetes.io/service-name": svc(i)}},
				"addressType": "IPv4", "ports": []any{map[string]any{"name": "http", "port": 8080, "protocol": "TCP"}},
				"endpoints": []any{map[string]any{"addresses": []any{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, "conditions": map[string]any{"ready": true},
					"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": svc(i) + "-pod"}}}})
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		tb.Fatal(err)
	}
	objs, err := watcher.DecodeManifests("ingresses.yaml", append(append(example, "\n---\n"...), list...), in.Namespace, in.Watch)
	if err != nil {
		tb.Fatal(err)
	}
	return objs
}

// growingSource gives all objects but the last left of each watched resource that grows
// (all of them when grows is empty), one fewer left with every read after next: a new route
// (Ingress, Service, EndpointSlice) per change, the lists shared as the kube source shares its
// converted objects.
type growingSource struct {
	mu    sync.Mutex
	all   *snapshot.Objects
	left  int
	grows []string
}

func (s *growingSource) Run(ctx context.Context, changed func()) error { <-ctx.Done(); return nil }

func (s *growingSource) Objects(context.Context) (*snapshot.Objects, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return kubeObjects(s.all, func(resource string, list []*snapshot.Object) []*snapshot.Object {
		if len(s.grows) > 0 && !slices.Contains(s.grows, resource) {
			return list
		}
		return list[:len(list)-s.left]
	}), nil
}

// kubeObjects is all as the kube source gives it, each list of resources as list makes it:
// without typed EndpointSlices, which the kube source reads only in the namespaces the
// services name (none with the examples).
func kubeObjects(all *snapshot.Objects, list func(resource string, l []*snapshot.Object) []*snapshot.Object) *snapshot.Objects {
	out := *all
	out.EndpointSlices = nil
	out.Resources = make(map[string][]*snapshot.Object, len(all.Resources))
	for name, l := range all.Resources {
		out.Resources[name] = list(name, l)
	}
	return &out
}

// next adds the next route; false once there is none left.
func (s *growingSource) next() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == 0 {
		return false
	}
	s.left--
	return true
}

// runtimeCLI answers the runtime API as HAProxy 3.4 does when every command succeeds; show
// map lists the maps of mapsDir.
type runtimeCLI struct{ mapsDir string }

func (c runtimeCLI) Command(_ context.Context, line string) (string, error) {
	if strings.Contains(line, "\n") { // one command with a payload
		return c.answer(line[:strings.IndexByte(line, '\n')]), nil
	}
	var out strings.Builder
	for cmd := range strings.SplitSeq(line, "; ") {
		out.WriteString(c.answer(cmd))
	}
	return out.String(), nil
}

func (c runtimeCLI) answer(cmd string) string {
	switch {
	case cmd == "show info":
		return "Name: HAProxy\nVersion: 3.4.7\nPid: 42\n"
	case cmd == "show map":
		var b strings.Builder
		b.WriteString("# id (file) description\n")
		files, _ := filepath.Glob(filepath.Join(c.mapsDir, "*.map"))
		for i, f := range files {
			fmt.Fprintf(&b, "%d (%s) pattern loaded from file '%s' used by map at file 'haproxy.cfg' line 1. curr_ver=0 next_ver=0 entry_cnt=1\n", i, f, f)
		}
		return b.String() + "\n"
	case cmd == "show acl":
		return "# id (file) description\n\n"
	case strings.HasPrefix(cmd, "prepare map"):
		return "New version created: 1\n"
	case strings.HasPrefix(cmd, "add backend"):
		return "New backend registered.\n"
	case strings.HasPrefix(cmd, "publish backend"):
		return "Backend published.\n"
	case strings.HasPrefix(cmd, "add server"):
		return "New server registered.\n"
	case strings.HasPrefix(cmd, "del server"):
		return "Server deleted.\n"
	}
	return "\n"
}

// noReload is a reloader that has HAProxy load nothing: the bench's changes all go through
// the runtime API; the first sync's reload loads the first configuration.
type noReload struct{}

func (noReload) Reload(context.Context) error { return nil }

// ingressSyncConfig is the configuration of the Ingress example's sync benchmarks: its
// watched resources, a directory of its own, no haproxy -c.
func ingressSyncConfig(b *testing.B) *config.Once { return exampleSyncConfig(b, ingressWatch) }

// exampleSyncConfig is the configuration of an example's sync benchmarks: the watched
// resources watch, a directory of its own, no haproxy -c.
func exampleSyncConfig(b *testing.B, watch []string) *config.Once {
	args := []string{"--dir", b.TempDir(), "--validate=false"}
	for _, w := range watch {
		args = append(args, "--watch", w)
	}
	cfg, err := config.ParseOnce("validate", args, "", func(string) string { return "" }, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkSyncNewIngress10000: one sync of the sidecar's pipeline for a new route (an
// Ingress, its Service and EndpointSlice) at 10,000 Ingresses of the Ingress example, as the
// binary makes it with the kube source: the objects read (converted already, as the informers
// keep them), decoded, assembled, rendered, planned for the runtime API, applied (a fake
// HAProxy 3.4 that accepts every command) and written as a new generation. No haproxy -c, no
// object status. B/op is what the collector marks per change (with GOGC); cpu-ms/op the
// process's CPU time; live-MB the heap live after the changes (the benchmark's objects
// included). -benchtime at most 100x.
func BenchmarkSyncNewIngress10000(b *testing.B) {
	const n, extra = 10000, 100
	cfg := ingressSyncConfig(b)
	p, src := syncPipeline(b, cfg, ingressBenchObjects(b, cfg.Inputs, n, extra), extra)
	benchSyncChanges(b, p, src.next, extra)
}

// benchSyncChanges runs p's first sync, then, per op, one sync after next made a change (at
// most most changes), each applied through the runtime API. It reports cpu-ms/op, the
// process's CPU time; p50-ms, p95-ms and max-ms, each sync's wall time; and live-MB, what
// stays between changes: the objects (as the informers hold them, the benchmark's included),
// the snapshot's lookups, the renderer's, the runtime API's model, the pipeline's.
func benchSyncChanges(b *testing.B, p *pipeline.Pipeline, next func() bool, most int) {
	ctx := context.Background()
	if res := p.Sync(ctx, "start"); res.Outcome != apply.Applied {
		b.Fatalf("first sync: %v %v", res.Outcome, res.Err)
	}
	b.ReportAllocs()
	runtime.GC()
	cpu := benchCPU()
	var took []time.Duration
	for b.Loop() {
		if !next() {
			b.Fatalf("more than %d changes", most)
		}
		t0 := time.Now()
		res := p.Sync(ctx, "change")
		took = append(took, time.Since(t0))
		if res.Outcome != apply.Applied || res.Action.String() != "runtime" {
			b.Fatalf("change: %v %v %v", res.Outcome, res.Action, res.Err)
		}
	}
	b.ReportMetric(float64(benchCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	// The spread of one sync's wall time: a tail here is the sync's own, not the machine's.
	slices.Sort(took)
	at := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(at(1), "max-ms")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
	runtime.KeepAlive(p)
}

// syncPipeline is the pipeline run wires for the local HAProxy through a master socket, with
// src as the source (all objects but the last extra of each list) and fakes for HAProxy.
func syncPipeline(tb testing.TB, cfg *config.Once, all *snapshot.Objects, extra int) (*pipeline.Pipeline, *growingSource) {
	tb.Helper()
	src := &growingSource{all: all, left: extra}
	return syncPipelineFrom(tb, cfg, src), src
}

// syncPipelineFrom is the pipeline run wires for the local HAProxy through a master socket,
// with src as the source and fakes for HAProxy.
func syncPipelineFrom(tb testing.TB, cfg *config.Once, src pipeline.Source) *pipeline.Pipeline {
	tb.Helper()
	dir := tb.TempDir()
	store, err := generation.Open(filepath.Join(dir, generation.ConfigName), filepath.Join(dir, generation.CertDirName), filepath.Join(dir, "state"))
	if err != nil {
		tb.Fatal(err)
	}
	bo, err := snapshotOptions(cfg.Inputs)
	if err != nil {
		tb.Fatal(err)
	}
	ssl := filepath.Join(dir, generation.CertDirName)
	ro := cfg.Render.Options(ssl)
	ro.MapsDir, ro.FilesDir = store.MapsDir(), store.FilesDir()
	log := slog.New(slog.DiscardHandler)
	p, err := pipeline.New(pipeline.Config{
		Source:     src,
		Inputs:     snapshot.Builder{Options: bo},
		Renderer:   render.New(ro),
		Store:      store,
		Reloader:   noReload{},
		Endpoint:   "master-socket",
		WaitMin:    time.Millisecond,
		Logger:     log,
		Runtime:    runtimeapi.New(runtimeapi.Options{Client: runtimeCLI{mapsDir: store.MapsDir()}, SSLDir: ssl, MapsDir: store.MapsDir(), Logger: log}),
		KeepInputs: true,
		CheckAfter: true,
		Manifests:  manifests(cfg.Inputs),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
