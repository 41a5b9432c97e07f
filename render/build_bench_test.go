package render

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
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

// benchBuild measures what the sync's build stage does at each sync: the snapshot assembled
// from the source's objects, then rendered; before each build one object of resource change
// is replaced by another version of it (alternately a and b, converted once, as the kube
// source holds them: the other objects stay the same objects). change "" changes nothing.
func benchBuild(b *testing.B, raw map[string][]map[string]any, templates map[string]string, change string, a, bb map[string]any, watch ...string) {
	benchBuildAt(b, raw, templates, change, 0, a, bb, watch...)
}

// benchBuildAt is benchBuild with the object at index at of resource change replaced.
func benchBuildAt(b *testing.B, raw map[string][]map[string]any, templates map[string]string, change string, at int, a, bb map[string]any, watch ...string) {
	var versions [2]*snapshot.Object
	if change != "" {
		versions = [2]*snapshot.Object{convert(b, a), convert(b, bb)}
	}
	benchSteps(b, raw, templates, func(objs *snapshot.Objects, step int) {
		if change != "" {
			objs.Resources[change] = replaced(objs.Resources[change], at, versions[step%2])
		}
	}, watch...)
}

// replaced is list with its object at index at replaced by o: a new list, as a source gives
// one (the snapshot's PodCache holds the last; a list is never changed once given).
func replaced(list []*snapshot.Object, at int, o *snapshot.Object) []*snapshot.Object {
	l := slices.Clone(list)
	l[at] = o
	return l
}

// convert is u as a source holds it.
func convert(tb testing.TB, u map[string]any) *snapshot.Object {
	tb.Helper()
	var conv snapshot.ObjectConverter
	o, err := conv.FromUnstructured(u)
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

// benchSteps measures the build stage of one sync (benchBuild) after change(objs, step)
// changed the source's objects, step counting the builds from 0 (the first build, before
// the measure, is made with step 0: the objects as raw has them).
func benchSteps(b *testing.B, raw map[string][]map[string]any, templates map[string]string, change func(objs *snapshot.Objects, step int), watch ...string) {
	benchStepsFrom(b, raw, templates, 1, change, watch...)
}

// benchStepsFrom is benchSteps with the first warm builds (steps 0 to warm-1) made before the
// measure. The snapshot is assembled through a PodCache, as the sidecar's source does
// (sidecar.snapshotOptions): the watched resources' lookups of the last build are kept,
// or patched for the objects that changed; change must give new lists, never change one.
func benchStepsFrom(b *testing.B, raw map[string][]map[string]any, templates map[string]string, warm int, change func(objs *snapshot.Objects, step int), watch ...string) {
	objs, opts := benchObjects(b, raw, watch...)
	opts.PodCache = &snapshot.PodCache{}
	r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
	step := 0
	build := func() *Bundle {
		if step > 0 {
			change(objs, step)
		}
		step++
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
	for range warm - 1 {
		out = build()
	}
	b.SetBytes(int64(len(out.Config) + len(out.Maps["routes.map"])))
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		build()
	}
	reportCPU(b, cpu)
}

// benchStepsWarm is benchSteps with warm(objs) applied before a second build outside the
// measure (the objects as a source holds them some syncs after the start).
func benchStepsWarm(b *testing.B, raw map[string][]map[string]any, templates map[string]string, warm func(objs *snapshot.Objects), change func(objs *snapshot.Objects, step int), watch ...string) {
	benchStepsFrom(b, raw, templates, 2, func(objs *snapshot.Objects, step int) {
		if step == 1 {
			warm(objs)
			return
		}
		change(objs, step)
	}, watch...)
}

// reportCPU reports the process's CPU time per operation since cpu (cputime.Process), as
// cpu-ms/op: with other processes on the machine, the wall clock (ns/op) counts their time.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// firstChanged is a copy of the first object of list, changed by edit: another version of
// it.
func firstChanged(list []map[string]any, edit func(o map[string]any)) map[string]any {
	o := deepCopy(list[0]).(map[string]any)
	edit(o)
	return o
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// secondEndpoint gives the first EndpointSlice of raw a second ready endpoint (a pod added).
func secondEndpoint(raw map[string][]map[string]any) map[string]any {
	return firstChanged(raw["endpointslices"], func(o map[string]any) {
		eps := o["endpoints"].([]any)
		o["endpoints"] = append(eps, map[string]any{"addresses": []any{"10.9.9.9"}, "conditions": map[string]any{"ready": true},
			"targetRef": map[string]any{"kind": "Pod", "namespace": "bench", "name": "added-pod"}})
	})
}

// BenchmarkBuildHTTPRoute: the build stage of one sync (snapshot assembly and render) with
// the Gateway API example at 1,000 and 3,000 HTTPRoutes, after one route's path changed, and
// after a pod was added to one Service (docs/performance.md).
func BenchmarkBuildHTTPRoute(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		raw := httprouteObjects(n)
		route := firstChanged(raw["httproutes"], func(o map[string]any) {
			rules := o["spec"].(map[string]any)["rules"].([]any)
			rules[1].(map[string]any)["matches"].([]any)[0].(map[string]any)["path"].(map[string]any)["value"] = "/v2"
		})
		tpl := loadConfigMapData(b, "../examples/templates/httproute.yaml")
		b.Run(fmt.Sprintf("%d/route-changed", n), func(b *testing.B) {
			benchBuild(b, raw, tpl, "httproutes", raw["httproutes"][0], route, httprouteWatch...)
		})
		b.Run(fmt.Sprintf("%d/pod-added", n), func(b *testing.B) {
			benchBuild(b, raw, tpl, "endpointslices", raw["endpointslices"][0], secondEndpoint(raw), httprouteWatch...)
		})
		// As bench-routes changes a path: a route in the middle, its /api made /vC (a new
		// generation), still to Service i+1.
		mid := n / 2
		vc := deepCopy(raw["httproutes"][mid]).(map[string]any)
		vc["metadata"].(map[string]any)["generation"] = int64(2)
		vc["spec"].(map[string]any)["rules"] = []any{benchRule("/", mid), benchRule("/v1", (mid+1)%n)}
		b.Run(fmt.Sprintf("%d/route-middle", n), func(b *testing.B) {
			benchBuildAt(b, raw, tpl, "httproutes", mid, raw["httproutes"][mid], vc, httprouteWatch...)
		})
		// After the status writer's wave: every route's status and resourceVersion written
		// (new objects), alternately two versions of them, each build after a wave.
		waves := [2][]*snapshot.Object{statusWave(b, raw["httproutes"], 0), statusWave(b, raw["httproutes"], 1)}
		b.Run(fmt.Sprintf("%d/status-wave", n), func(b *testing.B) {
			benchSteps(b, raw, tpl, func(objs *snapshot.Objects, step int) {
				objs.Resources["httproutes"] = slices.Clone(waves[step%2])
			}, httprouteWatch...)
		})
		// As route-middle, after the status writer's wave (every route's status written once, as
		// after the start): the routes the blocks compare are the wave's objects, whose specs
		// are equal to those the blocks were computed with, not the same.
		wave := statusWave(b, raw["httproutes"], 0)
		mids := [2]*snapshot.Object{wave[mid], convert(b, vc)}
		b.Run(fmt.Sprintf("%d/route-middle-after-wave", n), func(b *testing.B) {
			benchStepsWarm(b, raw, tpl, func(objs *snapshot.Objects) {
				objs.Resources["httproutes"] = slices.Clone(wave)
			}, func(objs *snapshot.Objects, step int) {
				objs.Resources["httproutes"] = replaced(objs.Resources["httproutes"], mid, mids[step%2])
			}, httprouteWatch...)
		})
		// As bench-routes adds a route: a new Service, its EndpointSlice and a route to it, after
		// the others (by name, as by creation time); one more at each build.
		b.Run(fmt.Sprintf("%d/route-added", n), func(b *testing.B) {
			benchSteps(b, raw, tpl, func(objs *snapshot.Objects, step int) {
				i := n + step
				objs.Resources["services"] = append(objs.Resources["services"], convert(b, benchService(i)))
				objs.Resources["endpointslices"] = append(objs.Resources["endpointslices"], convert(b, benchSlice(i)))
				objs.Resources["httproutes"] = append(objs.Resources["httproutes"], convert(b, benchRoute(i, benchRule("/", i))))
			}, httprouteWatch...)
		})
	}
}

// statusWave are the routes as the status writer leaves them (version v of it): each with a
// new resourceVersion and status, converted as a source holds them.
func statusWave(tb testing.TB, routes []map[string]any, v int) []*snapshot.Object {
	out := make([]*snapshot.Object, len(routes))
	for i, r := range routes {
		o := deepCopy(r).(map[string]any)
		md := o["metadata"].(map[string]any)
		md["resourceVersion"] = fmt.Sprint(100000 + 2*i + v)
		cond := func(typ, reason string) any {
			return map[string]any{"type": typ, "status": "True", "reason": reason, "message": "", "observedGeneration": md["generation"],
				"lastTransitionTime": fmt.Sprintf("2026-01-01T00:00:%02dZ", v)}
		}
		o["status"] = map[string]any{"parents": []any{map[string]any{"controllerName": "haproxy-sidecar.io/gateway",
			"parentRef":  map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
			"conditions": []any{cond("Accepted", "Accepted"), cond("ResolvedRefs", "ResolvedRefs")}}}}
		out[i] = convert(tb, o)
	}
	return out
}

// BenchmarkBuildIngress: the same with the Ingress example at 1,000, 3,000 and 10,000 Ingresses,
// and after an Ingress added to a new Service among the others and another deleted.
func BenchmarkBuildIngress(b *testing.B) {
	for _, n := range []int{1000, 3000, 10000} {
		raw := ingressObjects(n)
		ing := firstChanged(raw["ingresses"], func(o map[string]any) {
			rule := o["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
			rule["http"].(map[string]any)["paths"].([]any)[1].(map[string]any)["path"] = "/v2"
		})
		tpl := loadConfigMapData(b, "../examples/templates/ingress.yaml")
		b.Run(fmt.Sprintf("%d/route-changed", n), func(b *testing.B) {
			benchBuild(b, raw, tpl, "ingresses", raw["ingresses"][0], ing, ingressWatch...)
		})
		b.Run(fmt.Sprintf("%d/pod-added", n), func(b *testing.B) {
			benchBuild(b, raw, tpl, "endpointslices", raw["endpointslices"][0], secondEndpoint(raw), ingressWatch...)
		})
		b.Run(fmt.Sprintf("%d/route-added", n), func(b *testing.B) {
			benchSteps(b, raw, tpl, ingressAddedAndDeleted(b, n, "haproxy-sidecar"), ingressWatch...)
		})
	}
}

// ingressAddedAndDeleted is the change of each build of a route-added case: as bench-routes
// adds a route, a new Service, its EndpointSlice and an Ingress of class to it; and an
// Ingress deleted. The new Ingress is named to sort among the others, as names do in a
// cluster (bench-routes' ing-1000N sort after its ing-0NNNN): ing-XXXX-nSTEP, right after
// ing-XXXX, XXXX spread over the n Ingresses; the one deleted is another of the n, half of
// them away. Each list stays sorted, as the kube source keeps it, and is made anew (the
// snapshot before holds the old one).
func ingressAddedAndDeleted(tb testing.TB, n int, class string) func(objs *snapshot.Objects, step int) {
	return func(objs *snapshot.Objects, step int) {
		i, at := n+step, step*7919%n
		insertSorted(objs, "services", convert(tb, benchService(i)))
		insertSorted(objs, "endpointslices", convert(tb, benchSlice(i)))
		name := fmt.Sprintf("ing-%04d-n%d", at, step)
		insertSorted(objs, "ingresses", convert(tb, benchIngress(name, class, benchIngressPath("/", benchSvcName(i)))))
		deleteNamed(objs, "ingresses", "bench", fmt.Sprintf("ing-%04d", (at+n/2)%n))
	}
}

// insertSorted is o added to the list of resource in its place by namespace and name (a new
// list).
func insertSorted(objs *snapshot.Objects, resource string, o *snapshot.Object) {
	list := objs.Resources[resource]
	k, _ := slices.BinarySearchFunc(list, o, compareNamed)
	objs.Resources[resource] = slices.Concat(list[:k], []*snapshot.Object{o}, list[k:])
}

// deleteNamed is the object namespace/name taken out of the list of resource, if there (a
// new list).
func deleteNamed(objs *snapshot.Objects, resource, namespace, name string) {
	list := objs.Resources[resource]
	k, found := slices.BinarySearchFunc(list, [2]string{namespace, name}, func(o *snapshot.Object, key [2]string) int {
		return cmp.Or(strings.Compare(o.Namespace(), key[0]), strings.Compare(o.Name(), key[1]))
	})
	if found {
		objs.Resources[resource] = slices.Concat(list[:k], list[k+1:])
	}
}

// compareNamed orders objects by namespace, then name, as the snapshot sorts them.
func compareNamed(a, b *snapshot.Object) int {
	return cmp.Or(strings.Compare(a.Namespace(), b.Namespace()), strings.Compare(a.Name(), b.Name()))
}

// BenchmarkBuildIngressNginx: the same with the ingress-nginx example at 1,000 and 10,000
// Ingresses of class nginx (one in ten with annotations it reads), after one Ingress's path
// changed, and after an Ingress added among the others and another deleted.
func BenchmarkBuildIngressNginx(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		raw := nginxBenchObjects(n)
		ing := firstChanged(raw["ingresses"], func(o map[string]any) {
			rule := o["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
			rule["http"].(map[string]any)["paths"].([]any)[1].(map[string]any)["path"] = "/v2"
		})
		tpl := loadConfigMapData(b, "../examples/templates/ingress-nginx.yaml")
		b.Run(fmt.Sprintf("%d/route-changed", n), func(b *testing.B) {
			benchBuild(b, raw, tpl, "ingresses", raw["ingresses"][0], ing, ingressWatch...)
		})
		b.Run(fmt.Sprintf("%d/route-added", n), func(b *testing.B) {
			benchSteps(b, raw, tpl, ingressAddedAndDeleted(b, n, "nginx"), ingressWatch...)
		})
	}
}

// nginxBenchObjects are ingressObjects(n) of class nginx, one Ingress in ten with
// annotations of ingress-nginx's.
func nginxBenchObjects(n int) map[string][]map[string]any {
	raw := ingressObjects(n)
	for i, o := range raw["ingresses"] {
		o["spec"].(map[string]any)["ingressClassName"] = "nginx"
		if i%10 == 0 {
			o["metadata"].(map[string]any)["annotations"] = map[string]any{
				"nginx.ingress.kubernetes.io/proxy-body-size":    "8m",
				"nginx.ingress.kubernetes.io/proxy-read-timeout": "120",
				"nginx.ingress.kubernetes.io/ssl-redirect":       "false",
			}
		}
	}
	return raw
}

// BenchmarkFirstBuildHTTPRoute: the build stage of the sidecar's first sync (a new renderer:
// the template compiled, no module kept from a sync before) with the Gateway API example at
// 3,000 HTTPRoutes (docs/performance.md, start to every route served).
func BenchmarkFirstBuildHTTPRoute(b *testing.B) {
	raw := httprouteObjects(3000)
	tpl := loadConfigMapData(b, "../examples/templates/httproute.yaml")
	objs, opts := benchObjects(b, raw, httprouteWatch...)
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		snap, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"})
		if _, err := r.Render(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}
