package render

// Benchmarks of one pod's change at 10,000 services x 10 pods through the real path: what a
// source gives (the services ConfigMap, the pods), snapshot.Build with the source's PodCache,
// then the render by one renderer. Two sources:
//
//   - typed: typed pods, each converted by the PodCache once per resourceVersion (the kube
//     source);
//   - converted: pods a PodConverter converted ahead, each once per change (the file
//     source, the kube source with several clusters).
//
// Each iteration changes one pod of another service (readiness flipped: it leaves its
// service's pods or comes back; or its address changed), a new object with a new
// resourceVersion as an informer gives it. cpu-ms/op is the whole (build and render);
// build-cpu-ms/op and render-cpu-ms/op its parts, the process's CPU (the collector's
// background work included); build-thread-ms/op and render-thread-ms/op the CPU of the
// benchmark's thread during each (the stage's own work and the collector's work it assisted
// with). The numbers: docs/performance.md.

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
)

// sourcePods is what a source holds at 10,000 x 10, changed one pod at a time.
type sourcePods struct {
	objs    *snapshot.Objects
	typed   []*corev1.Pod
	conv    *snapshot.PodConverter // nil: typed pods in objs.Pods
	n, rv   int
	perSvc  int
	convert bool
}

func newSourcePods(services, perSvc int, convert bool) *sourcePods {
	data := make(map[string]string, services)
	for i := range services {
		name := fmt.Sprintf("svc%05d", i)
		svc := map[string]any{"namespace": "web", "selector": map[string]any{"app": name},
			"hostnames": []any{name + ".example.com", "www." + name + ".example.com"}, "ports": []any{8080}, "ssl": i%2 == 0}
		if i%10 == 0 {
			svc["path"] = "^/api/"
		}
		b, _ := json.Marshal(svc)
		data[name] = string(b)
	}
	s := &sourcePods{perSvc: perSvc, convert: convert, objs: &snapshot.Objects{ConfigMaps: []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"}, Data: data}}}}
	if convert {
		s.conv = &snapshot.PodConverter{}
	}
	for i := range services {
		app := fmt.Sprintf("svc%05d", i)
		for p := range perSvc {
			s.rv++
			s.typed = append(s.typed, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: fmt.Sprintf("%s-%d", app, p),
					UID: types.UID(fmt.Sprintf("uid-%s-%d", app, p)), ResourceVersion: strconv.Itoa(s.rv),
					Labels: map[string]string{"app": app, "pod-template-hash": "5d9c7b8f6d"}},
				Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.2.3",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", p, i/250%250, i%250),
					ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}}},
			})
		}
	}
	if convert {
		for _, p := range s.typed {
			s.objs.ConvertedPods = append(s.objs.ConvertedPods, s.conv.Convert(p))
		}
	} else {
		s.objs.Pods = s.typed
	}
	return s
}

// next changes one pod, of another service each time, as a new object.
func (s *sourcePods) next() {
	s.n++
	i := (s.n * 7919 * s.perSvc) % len(s.typed) // a prime: another service each time
	p := s.typed[i].DeepCopy()
	if s.n%2 == 0 {
		p.Status.ContainerStatuses[0].Ready = !p.Status.ContainerStatuses[0].Ready
	} else {
		p.Status.PodIP = fmt.Sprintf("10.200.%d.%d", s.n/250%250, s.n%250)
	}
	s.rv++
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.typed[i] = p
	if s.convert {
		s.objs.ConvertedPods[i] = s.conv.Convert(p)
	}
}

func benchBuildRender(b *testing.B, services int) {
	for _, mode := range []string{"typed", "converted"} {
		b.Run(mode, func(b *testing.B) {
			src := newSourcePods(services, 10, mode == "converted")
			opts := snapshot.Options{PodCache: &snapshot.PodCache{}, StatsPassword: "secret", StatsPasswordSet: true}
			r := New(Options{SSLDir: "/etc/haproxy/ssl"})
			snap, err := snapshot.Build(src.objs, opts)
			if err != nil {
				b.Fatal(err)
			}
			out, err := r.Render(context.Background(), snap) // compile, and keep, outside the loop
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out.Config)))
			runtime.LockOSThread() // the stages' own CPU: their thread's (cputime.Thread)
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			var build, render, buildOwn, renderOwn time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				src.next()
				b.StartTimer()
				start, startOwn := cputime.Process(), cputime.Thread()
				snap, err := snapshot.Build(src.objs, opts)
				if err != nil {
					b.Fatal(err)
				}
				built, builtOwn := cputime.Process(), cputime.Thread()
				if _, err := r.Render(context.Background(), snap); err != nil {
					b.Fatal(err)
				}
				end, endOwn := cputime.Process(), cputime.Thread()
				build += built - start
				render += end - built
				buildOwn += builtOwn - startOwn
				renderOwn += endOwn - builtOwn
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			b.ReportMetric(ms(build+render), "cpu-ms/op")
			b.ReportMetric(ms(build), "build-cpu-ms/op")
			b.ReportMetric(ms(render), "render-cpu-ms/op")
			b.ReportMetric(ms(buildOwn), "build-thread-ms/op")
			b.ReportMetric(ms(renderOwn), "render-thread-ms/op")
		})
	}
}

func BenchmarkBuildRenderDefault1000PodChange(b *testing.B)  { benchBuildRender(b, 1000) }
func BenchmarkBuildRenderDefault10000PodChange(b *testing.B) { benchBuildRender(b, 10000) }

// BenchmarkBuildStart10000 is the first Build at 10,000 x 10, with an empty PodCache: what a
// start costs (every pod converted, every service selected), so that what a later Build keeps
// does not make the start slower or bigger. B/op and allocs/op are the Build's alone; kept-MB/op
// what the Snapshot and the cache hold after it.
func BenchmarkBuildStart10000(b *testing.B) {
	for _, mode := range []string{"typed", "converted"} {
		b.Run(mode, func(b *testing.B) {
			src := newSourcePods(10000, 10, mode == "converted")
			b.ReportAllocs()
			b.ResetTimer()
			var (
				cpu  time.Duration
				kept uint64
				ms   runtime.MemStats
			)
			for i := 0; i < b.N; i++ {
				opts := snapshot.Options{PodCache: &snapshot.PodCache{}, StatsPassword: "secret", StatsPasswordSet: true}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.HeapAlloc
				b.StartTimer()
				start := cputime.Process()
				snap, err := snapshot.Build(src.objs, opts)
				if err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - start
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				kept += ms.HeapAlloc - before // the Snapshot and the cache, alive below
				runtime.KeepAlive(snap)
				runtime.KeepAlive(opts.PodCache)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(kept)/1e6/float64(b.N), "kept-MB/op")
		})
	}
}
