package render

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// benchObjects are the objects a source holds for raw (by resource name, as the informers
// hold them: converted once) and the Options that assemble them with the --watch specs given.
func benchObjects(tb testing.TB, raw map[string][]map[string]any, watch ...string) (*snapshot.Objects, snapshot.Options) {
	tb.Helper()
	var specs watchspec.List
	for _, s := range watch {
		if err := specs.Set(s); err != nil {
			tb.Fatal(err)
		}
	}
	var conv snapshot.ObjectConverter
	objs := &snapshot.Objects{Resources: map[string][]*snapshot.Object{}}
	for name, list := range raw {
		for _, u := range list {
			o, err := conv.FromUnstructured(u)
			if err != nil {
				tb.Fatal(err)
			}
			objs.Resources[name] = append(objs.Resources[name], o)
		}
	}
	return objs, snapshot.Options{Resources: specs}
}

// benchBuild measures what the sync's build stage does with the objects of snap's kind at
// each sync: the snapshot assembled from the source's objects, then rendered.
func benchBuild(b *testing.B, raw map[string][]map[string]any, templates map[string]string, watch ...string) {
	objs, opts := benchObjects(b, raw, watch...)
	r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
	build := func() *Bundle {
		snap, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		snap.Templates, snap.TemplateKey = templates, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		out, err := r.Render(context.Background(), snap)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	out := build() // compile outside the loop
	b.SetBytes(int64(len(out.Config) + len(out.Maps["routes.map"])))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		build()
	}
	reportCPU(b, cpu)
}

// reportCPU reports the process's CPU time per operation since cpu (processCPU), as
// cpu-ms/op: with other processes on the machine, the wall clock (ns/op) counts their time.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkBuildHTTPRoute: the build stage of one sync (snapshot assembly and render) with
// the Gateway API example at 1,000 and 3,000 HTTPRoutes (docs/performance.md).
func BenchmarkBuildHTTPRoute(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchBuild(b, httprouteObjects(n), loadConfigMapData(b, "../examples/templates/httproute.yaml"), httprouteWatch...)
		})
	}
}

// BenchmarkBuildIngress: the same with the Ingress example at 1,000 and 3,000 Ingresses.
func BenchmarkBuildIngress(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchBuild(b, ingressObjects(n), loadConfigMapData(b, "../examples/templates/ingress.yaml"), ingressWatch...)
		})
	}
}
