package render

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// BenchmarkLiveHeapIngress10000: the heap the render keeps live with the Ingress example at
// 10,000 Ingresses (docs/performance.md, 10,000 Ingresses): one renderer renders a snapshot,
// the same again, then one where an Ingress changed (the routes computed again). Reported for
// the second and third: the heap in use once collected after it (heap-MB: what the renderer
// and the snapshots hold between syncs), the most the heap held live during it (peak-MB: the
// live heap at each collection, GOGC=5 making one every 5% of growth), and the bytes it
// allocated.
func BenchmarkLiveHeapIngress10000(b *testing.B) {
	benchLiveHeap(b, ingressObjects(10000), "../examples/templates/ingress.yaml")
}

// BenchmarkLiveHeapIngressNginx10000: the same with the ingress-nginx example
// (nginxBenchObjects).
func BenchmarkLiveHeapIngressNginx10000(b *testing.B) {
	benchLiveHeap(b, nginxBenchObjects(10000), "../examples/templates/ingress-nginx.yaml")
}

// benchLiveHeap measures the heap the render of example keeps live with the Ingresses of raw
// (BenchmarkLiveHeapIngress10000), the first Ingress's second path changed.
func benchLiveHeap(b *testing.B, raw map[string][]map[string]any, example string) {
	changed := firstChanged(raw["ingresses"], func(o map[string]any) {
		rule := o["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
		rule["http"].(map[string]any)["paths"].([]any)[1].(map[string]any)["path"] = "/v2"
	})
	tpl := loadConfigMapData(b, example)
	objs, opts := benchObjects(b, raw, ingressWatch...)
	var conv snapshot.ObjectConverter
	versions := [2]*snapshot.Object{objs.Resources["ingresses"][0], nil}
	o, err := conv.FromUnstructured(changed)
	if err != nil {
		b.Fatal(err)
	}
	versions[1] = o
	snap := func(v int) *snapshot.Snapshot {
		objs.Resources["ingresses"][0] = versions[v]
		s, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Templates, s.TemplateKey = tpl, "template"
		s.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		return s
	}
	var ms runtime.MemStats
	live := func() float64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / 1e6
	}
	// measure renders s with r and adds what it held and allocated to m.
	measure := func(r *Renderer, s *snapshot.Snapshot, m *[3]float64) {
		live()
		before := ms.TotalAlloc
		peak := peakLive(func() {
			if _, err := r.Render(context.Background(), s); err != nil {
				b.Fatal(err)
			}
		})
		m[0] += live()
		m[1] += peak
		m[2] += float64(ms.TotalAlloc-before) / 1e6
	}
	var same, change [3]float64
	for b.Loop() {
		r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
		s0, s1 := snap(0), snap(1)
		if _, err := r.Render(context.Background(), s0); err != nil {
			b.Fatal(err)
		}
		measure(r, s0, &same)
		measure(r, s1, &change)
		runtime.KeepAlive(s0)
		runtime.KeepAlive(s1)
	}
	n := float64(b.N)
	for i, unit := range []string{"heap-MB", "peak-MB", "alloc-MB"} {
		b.ReportMetric(same[i]/n, unit+"-same")
		b.ReportMetric(change[i]/n, unit+"-changed")
	}
}

// peakLive runs f with GOGC=5 and returns the most the heap held live at a collection
// meanwhile, in MB.
func peakLive(f func()) float64 {
	old := debug.SetGCPercent(5)
	defer debug.SetGCPercent(old)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	read := func() {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				read()
			}
		}
	}()
	f()
	runtime.GC() // the collection that ends f: what it held at its end counts too
	close(stop)
	wg.Wait()
	read()
	return float64(peak) / 1e6
}
