package watcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/cputime"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/scalepods"
)

// writeScale writes what hack/gen-scale does: the services ConfigMap (services.json) and a
// List of pods each service selects (pods.json), as `kubectl get -o json` prints them.
func writeScale(tb testing.TB, dir string, services, pods int) {
	tb.Helper()
	data := map[string]string{}
	items := make([]any, 0, services*pods)
	for s := range services {
		name, ns := scalepods.Service(s)
		b, _ := json.Marshal(map[string]any{"namespace": ns, "selector": map[string]string{"app": name},
			"hostnames": []string{name + ".example.com"}, "ports": []int{8080}})
		data[name] = string(b)
		for p := range pods {
			items = append(items, scalepods.Pod(s, p))
		}
	}
	write := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("services.json", corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "services", Namespace: "lb"}, Data: data})
	write("pods.json", map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// heapPeak samples the heap's objects (live and not yet collected) until stop: the peak a
// read reaches, what the process's RSS follows.
func heapPeak() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// liveHeap is the heap's live objects: after two collections, so that what sync.Pools held
// (the encoder's buffer of a 61 MB file) is gone.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPodEditInBigList: one pod's readiness edited in the List of docs/performance.md's
// 10,000 services x 10 pods (61 MB; SCALE_SERVICES sets the services), then Objects: what the
// file source keeps between reads (kept-MB: the source alone, the objects of its last read
// dropped; live-MB: with them), the peak of the heap during the first read and during the
// re-reads, and the re-read's CPU time (cpu-ms/op).
func BenchmarkPodEditInBigList(b *testing.B) {
	services := 10000
	if v := os.Getenv("SCALE_SERVICES"); v != "" {
		fmt.Sscan(v, &services)
	}
	dir := b.TempDir()
	writeScale(b, dir, services, 10)
	pods := filepath.Join(dir, "pods.json")
	data, err := os.ReadFile(pods)
	if err != nil {
		b.Fatal(err)
	}
	ready := []byte(`"ready":true`)
	first := bytes.Index(data, ready)
	base := liveHeap()
	f := &File{Dir: dir, DefaultNamespace: "lb", PodConverter: &snapshot.PodConverter{}, MaxFileSize: -1}
	stop := heapPeak()
	objs, err := f.Objects(context.Background())
	firstPeak := stop()
	if err != nil || len(objs.ConvertedPods) != services*10 {
		b.Fatalf("%v, %d pods", err, len(objs.ConvertedPods))
	}
	live := liveHeap()
	runtime.KeepAlive(objs)
	objs = nil
	kept := liveHeap()
	// HEAP_PROFILE: what the source keeps, by the lines that allocated it (with
	// -memprofilerate), and (HEAP_PROFILE.after, alloc_space against it) what the re-reads
	// allocated.
	profile := func(suffix string) {
		if p := os.Getenv("HEAP_PROFILE"); p != "" {
			fh, err := os.Create(p + suffix)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(fh, 0); err != nil {
				b.Fatal(err)
			}
			fh.Close()
		}
	}
	profile("")
	var peak uint64
	var cpu time.Duration
	n := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		flip := []byte(`"ready":false`)
		if i%2 == 1 {
			flip = ready
		}
		edited := bytes.Join([][]byte{data[:first], flip, data[first+len(ready):]}, nil)
		if err := os.WriteFile(pods, edited, 0o644); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		stop := heapPeak()
		c := cputime.Process()
		b.StartTimer()
		o, err := f.Objects(context.Background())
		b.StopTimer()
		cpu += cputime.Process() - c
		peak = max(peak, stop())
		if err != nil || len(o.ConvertedPods) != services*10 {
			b.Fatalf("%v, %d pods", err, len(o.ConvertedPods))
		}
		n++
		b.StartTimer()
	}
	profile(".after")
	if f.work.decoded != 1 {
		b.Fatalf("a re-read decoded %d objects, want the one edited", f.work.decoded)
	}
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mb(live-base), "live-MB")
	b.ReportMetric(mb(kept-base), "kept-MB")
	b.ReportMetric(mb(firstPeak), "first-peak-MB")
	b.ReportMetric(mb(peak), "reread-peak-MB")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/op")
	runtime.KeepAlive(f)
}
