package snapshot

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/scalepods"
)

// indexHeap is the heap a PodCache's pod index of n converted pods of hack/gen-scale's shape
// (10 a service, 100 namespaces) holds per pod once every service selected its pods (the label
// index made), the pods themselves not counted.
func indexHeap(n int) float64 {
	var c PodConverter
	pods := make([]*Pod, n)
	for i := range pods {
		pods[i] = c.Convert(scalePod(i/10, i%10, false))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := newPodIndex(nil, pods, &PodCache{}, nil)
	for s := range n / 10 {
		name, ns := scalepods.Service(s)
		if got := len(ix.selectPods(ns, labels.SelectorFromSet(labels.Set{"app": name}))); got != 10 {
			panic(fmt.Sprintf("the index selected %d pods of %s, want 10", got, name))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ix)
	runtime.KeepAlive(pods)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkPodIndexHeap: the heap the pod index holds per pod between Builds (live-B/pod) at
// 100,000 pods, 10 a service.
func BenchmarkPodIndexHeap(b *testing.B) {
	var bytes float64
	for b.Loop() {
		bytes = indexHeap(100000)
	}
	b.ReportMetric(bytes, "live-B/pod")
}

// TestPodIndexCompact: the pod index keeps a pod in an entry of 24 bytes in one slice, named
// by int32 indexes in its namespace's list, its label lists and the last Build's list (no map
// by pod, no pointer a pod in the lists), each list at its size: 20,000 pods of 10 a service
// take at most 56 bytes each, selected (47 measured; 144 with an entry of 64 bytes, a map by
// pod, the last Build's pods and lists of pointers grown by appends).
func TestPodIndexCompact(t *testing.T) {
	if s := unsafe.Sizeof(podEntry{}); s > 24 {
		t.Errorf("a podEntry is %d bytes, want 24 at most", s)
	}
	if testing.Short() || raceEnabled {
		return
	}
	if live := indexHeap(20000); live > 56 {
		t.Errorf("the index holds %.0f bytes a pod, want 56 at most", live)
	}
}

// decodedHeap is the heap a PodCache holds per service once a Decode of n service entries of
// hack/gen-scale's shape went through it (the inputs it gave dropped, the ConfigMap's texts
// not counted): the entries decoded (records, selectors, hashes) and what finds them again.
func decodedHeap(n int) float64 {
	data := make(map[string]string, n)
	for s := range n {
		name, ns := scalepods.Service(s)
		data[name] = fmt.Sprintf(`{"namespace":%q,"selector":{"app":%q},"hostnames":["%s.example.com"],"ports":[8080]}`, ns, name, name)
	}
	objs := &Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", data)}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cache := &PodCache{}
	if ins := Decode(objs, Options{PodCache: cache}); len(ins.List) != n {
		panic(fmt.Sprintf("Decode gave %d inputs, want %d", len(ins.List), n))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(cache)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestPodCacheDecodedCompact: the PodCache keeps the last Decode's service entries as two
// slices by name (names, and each entry's text, decoded form and hash) rather than a map by
// name and a copy of the inputs it gave: 10,000 entries take at most 620 bytes each, the
// records and selectors included (542 measured; 792 with the map and the copy).
func TestPodCacheDecodedCompact(t *testing.T) {
	if testing.Short() || raceEnabled {
		return
	}
	if live := decodedHeap(10000); live > 620 {
		t.Errorf("the cache holds %.0f bytes a service entry, want 620 at most", live)
	}
}

// TestPodIndexUpdateAllocates: one pod replaced in its place (a source's pod edit) updates the
// index of 20,000 pods allocating at most 5 bytes a pod: each pod's entry at its place, which
// becomes the next update's list (4 bytes), and a bit a pod (4.1 measured; 8.2 with a list of
// each pod's entry as a pointer).
func TestPodIndexUpdateAllocates(t *testing.T) {
	if raceEnabled {
		return
	}
	const n = 20000
	var c PodConverter
	pods := make([]*Pod, n)
	for i := range pods {
		pods[i] = c.Convert(scalePod(i/10, i%10, false))
	}
	ix := newPodIndex(nil, pods, &PodCache{}, nil)
	var before, after runtime.MemStats
	for k := range 3 {
		pods = slices.Clone(pods)
		pods[5000+k] = c.Convert(scalePod(500, k, false)) // another object in its place
		runtime.ReadMemStats(&before)
		if !ix.update(nil, pods) {
			t.Fatal("one pod's change made the index anew")
		}
		runtime.ReadMemStats(&after)
		if per := float64(after.TotalAlloc-before.TotalAlloc) / n; per > 5 {
			t.Errorf("update %d allocated %.1f bytes a pod, want 5 at most", k, per)
		}
	}
	if got := len(ix.selectPods("ns-000", labels.SelectorFromSet(labels.Set{"app": "svc-00500"}))); got != 10 {
		t.Errorf("svc-00500 has %d pods after the updates, want 10", got)
	}
}
