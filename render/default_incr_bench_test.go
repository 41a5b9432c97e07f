package render

// Benchmarks of the default template rendered again after one pod's change, by one renderer
// (which keeps the loops' iterations from one render to the next: jinja's reuse_body.go),
// with 1,000 and 10,000 services x 10 pods (benchSnapshot). Each iteration renders a snapshot
// differing from the one before by one pod, of another service each time: a pod that turns
// ready or not (the snapshot shows ready pods only: it leaves or joins its service's pods),
// or a pod's address changed. "first" is a new renderer's first render (keeping every
// iteration). Two ways of making the next snapshot:
//
//   - kept: the services that did not change are the same maps (a snapshot updated per
//     object);
//   - rebuilt: every service is a new map with a new pods record, holding the same pod
//     records (what inputs/snapshot's buildServices does at each sync today).
//
// cpu-ms/op is the process's CPU during the render, the collector's background work included
// (brought about by the benchmark's own snapshots too); thread-cpu-ms/op the render's thread
// alone (its work, and the collector's work it assisted with). The numbers:
// docs/performance.md.

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
)

// podChanges makes the snapshots of the benchmark: each one differs from the one before by
// one pod.
type podChanges struct {
	snap    *snapshot.Snapshot
	shapes  record.Shapes
	n       int
	gone    map[int]any // by service: the pod taken out of its pods (not ready), to put back
	rebuild bool        // every service a new map, with a new pods record
}

func newPodChanges(services int, rebuild bool) *podChanges {
	return &podChanges{snap: benchSnapshot(services, 10, true), gone: map[int]any{}, rebuild: rebuild}
}

// next is the next snapshot: one pod of one service changed.
func (c *podChanges) next() *snapshot.Snapshot {
	c.n++
	old := c.snap.Services
	i := (c.n * 7919) % len(old) // a prime: another service each time, all over the list
	pods := maps.Collect(old[i].Field("pods").(*record.Record).All())
	name := old[i].Field("name").(string)
	if c.n%2 == 0 {
		// Readiness flipped: the pod leaves its service's pods, or comes back.
		pod := name + "-0"
		if p, ok := c.gone[i]; ok {
			pods[pod] = p
			delete(c.gone, i)
		} else {
			c.gone[i] = pods[pod]
			delete(pods, pod)
		}
	} else {
		// Another address.
		raw := benchPod(name, 1)
		raw["status"].(map[string]any)["podIP"] = fmt.Sprintf("10.200.%d.%d", c.n/250%250, c.n%250)
		pods[name+"-1"] = record.Of(&c.shapes, raw)
	}
	svc := withPods(old[i], record.FromMap(nil, pods))
	s := *c.snap
	s.Services = make([]*record.Record, len(old))
	for j, o := range old {
		if c.rebuild && j != i {
			o = withPods(o, record.FromMap(nil, maps.Collect(o.Field("pods").(*record.Record).All())))
		}
		s.Services[j] = o
	}
	s.Services[i] = svc
	c.snap = &s
	return c.snap
}

func benchPodChange(b *testing.B, services int) {
	b.Run("first", func(b *testing.B) {
		// The first render of a renderer (which keeps every iteration): compiling included.
		s := benchSnapshot(services, 10, true)
		b.ReportAllocs()
		b.ResetTimer()
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			start := cputime.Process()
			if _, err := New(Options{SSLDir: "/etc/haproxy/ssl"}).Render(context.Background(), s); err != nil {
				b.Fatal(err)
			}
			cpu += cputime.Process() - start
		}
		b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	})
	for _, mode := range []string{"kept", "rebuilt"} {
		b.Run(mode, func(b *testing.B) {
			c := newPodChanges(services, mode == "rebuilt")
			r := New(Options{SSLDir: "/etc/haproxy/ssl"})
			out, err := r.Render(context.Background(), c.snap) // compile, and keep, outside the loop
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out.Config)))
			runtime.LockOSThread() // the render's own CPU: its thread's (cputime.Thread)
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			var cpu, own time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := c.next()
				b.StartTimer()
				start, startOwn := cputime.Process(), cputime.Thread()
				if _, err := r.Render(context.Background(), s); err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - start
				own += cputime.Thread() - startOwn
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(own)/float64(time.Millisecond)/float64(b.N), "thread-cpu-ms/op")
		})
	}
}

// withPods is svc, a new record, with pods as its "pods".
func withPods(svc, pods *record.Record) *record.Record {
	return svc.Patched([]record.Change{{Key: "pods", Value: pods}})
}

func BenchmarkRenderDefault1000PodChange(b *testing.B)  { benchPodChange(b, 1000) }
func BenchmarkRenderDefault10000PodChange(b *testing.B) { benchPodChange(b, 10000) }
