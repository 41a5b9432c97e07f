package render

import (
	"context"
	"runtime"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestKeptRenderHeapStaysFlat: the renderer the sidecar keeps from sync to sync holds what the
// last render needs, not what every render made: with the HTTPRoute example at 3,000 routes,
// 40 syncs that each add a route (the model computed again, its routes' parts kept) leave the
// heap where the first left it (the model no longer kept held its routes' parts, and each of
// them it, one more model at each sync: 1 MB a sync).
func TestKeptRenderHeapStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 3,000 routes 41 times")
	}
	objs, opts := benchObjects(t, httprouteObjects(3000), httprouteWatch...)
	tpl := loadConfigMapData(t, "../examples/templates/httproute.yaml")
	r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout})
	render := func() {
		snap, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		if _, err := r.Render(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	}
	var ms runtime.MemStats
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	render()
	first := heap()
	for i := 1; i <= 40; i++ {
		objs.Resources["services"] = append(objs.Resources["services"], convert(t, benchService(3000+i)))
		objs.Resources["endpointslices"] = append(objs.Resources["endpointslices"], convert(t, benchSlice(3000+i)))
		objs.Resources["httproutes"] = append(objs.Resources["httproutes"], convert(t, benchRoute(3000+i, benchRule("/", 3000+i))))
		render()
	}
	last := heap()
	runtime.KeepAlive(r) // what it keeps is what is measured
	runtime.KeepAlive(objs)
	if last > first+10<<20 {
		t.Errorf("the heap grew from %.1f MB after the first render to %.1f MB after 40 more, want about the same", float64(first)/1e6, float64(last)/1e6)
	}
}
