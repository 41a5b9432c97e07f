package snapshot

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/scalepods"
)

// scalePod is pod p of service s as hack/gen-scale writes it (the 10,000 services x 10 pods
// of docs/performance.md); kube adds what a cluster's pod has beside (resourceVersion, times,
// node and host IP).
func scalePod(s, p int, kube bool) *corev1.Pod {
	pod := scalepods.Pod(s, p)
	if kube {
		start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(s*10+p) * time.Second))
		pod.ResourceVersion = strconv.Itoa(1000000 + s*10 + p)
		pod.CreationTimestamp = start
		pod.Spec.NodeName = fmt.Sprintf("node-%d", s%50)
		pod.Status.HostIP = fmt.Sprintf("192.168.0.%d", s%50)
		pod.Status.StartTime = &start
	}
	return &pod
}

// convertedHeap converts n pods of the shape of scalePod with one converter, as the file
// source does at 10,000 x 10 (each typed pod dropped once converted), and returns the heap
// they hold once collected per pod (the converter's shared parts included), and the
// allocations of one Convert.
func convertedHeap(n int, kube bool) (bytes, allocs float64) {
	var c PodConverter
	out := make([]*Pod, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range out {
		out[i] = c.Convert(scalePod(i/10, i%10, kube))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(out)
	p := scalePod(1, 1, kube)
	allocs = testing.AllocsPerRun(100, func() { c.Convert(p) })
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), allocs
}

// BenchmarkConvertedPodHeap: the heap a converted pod holds (live-B/pod, the converter's
// shared parts included) over 100,000 pods of the shape hack/gen-scale writes
// (docs/performance.md, 10,000 services x 10 pods), and the allocations of a Convert
// (allocs/pod).
func BenchmarkConvertedPodHeap(b *testing.B) {
	for _, kube := range []bool{false, true} {
		b.Run(map[bool]string{false: "gen-scale", true: "kube"}[kube], func(b *testing.B) {
			var bytes, allocs float64
			for b.Loop() {
				bytes, allocs = convertedHeap(100000, kube)
			}
			b.ReportMetric(bytes, "live-B/pod")
			b.ReportMetric(allocs, "allocs/pod")
		})
	}
}

// TestConvertedPodCompact: a converted pod's own strings (name, uid, IP, times) are one
// string, held by its records as strings (their headers in the records, no any and no box
// each: see record.Keys.Layout), equal strings share their bytes, and 10,000 converted pods
// hold at most 355 bytes each (338 measured; 467 before the key lists held the values pods
// share and the records their strings and records as such, with a Pod of 80 bytes).
func TestConvertedPodCompact(t *testing.T) {
	var c PodConverter
	pod := c.Convert(scalePod(12, 3, true))
	meta, _ := pod.Object().Get("metadata")
	status, _ := pod.Object().Get("status")
	name, _ := meta.(*record.Record).Get("name")
	uid, _ := meta.(*record.Record).Get("uid")
	rv, _ := meta.(*record.Record).Get("resourceVersion")
	created, _ := meta.(*record.Record).Get("creationTimestamp")
	started, _ := status.(*record.Record).Get("startTime")
	ip, _ := status.(*record.Record).Get("podIP")
	ips, _ := status.(*record.Record).Get("podIPs")
	ip0, _ := ips.([]any)[0].(*record.Record).Get("ip")
	if name != "svc-00012-3" || uid != "uid-12-3" || rv != "1000123" || created != "2026-01-02T03:06:08Z" ||
		ip != "10.0.12.4" || ip0 != ip || started != created {
		t.Fatalf("got name %v, uid %v, resourceVersion %v, creationTimestamp %v, podIP %v, podIPs[0].ip %v, startTime %v",
			name, uid, rv, created, ip, ip0, started)
	}
	// The order of the strings is the order of the fields in the Go types.
	strs := []any{name, uid, rv, created, ip}
	for i := 1; i < len(strs); i++ {
		a, b := strs[i-1].(string), strs[i].(string)
		if unsafe.Pointer(unsafe.StringData(b)) != unsafe.Add(unsafe.Pointer(unsafe.StringData(a)), len(a)) {
			t.Errorf("%q is not right after %q: the pod's own strings are not one", b, a)
		}
	}
	// The metadata record holds its strings' headers one after the other, in key order.
	headers := []any{created, name, rv, uid}
	for i := 1; i < len(headers); i++ {
		if dataOf(headers[i]) != unsafe.Add(dataOf(headers[i-1]), unsafe.Sizeof("")) {
			t.Errorf("the value of %q is not the header after %q's: not held by the record as strings", headers[i], headers[i-1])
		}
	}
	again, _ := meta.(*record.Record).Get("name")
	if dataOf(again) != dataOf(name) {
		t.Error("two reads of metadata.name are two boxes")
	}
	if unsafe.StringData(ip0.(string)) != unsafe.StringData(ip.(string)) || unsafe.StringData(started.(string)) != unsafe.StringData(created.(string)) ||
		unsafe.StringData(pod.name) != unsafe.StringData(name.(string)) || pod.ip() != ip {
		t.Error("equal strings of the pod (its IPs, its times, its name in the Pod) do not share their bytes")
	}
	if unsafe.Sizeof(Pod{}) > 64 {
		t.Errorf("a Pod is %d bytes, want 64 at most (a size class)", unsafe.Sizeof(Pod{}))
	}
	if testing.Short() || raceEnabled {
		return
	}
	if live, _ := convertedHeap(10000, false); live > 355 {
		t.Errorf("a converted pod holds %.0f bytes, want 355 at most", live)
	}
}

// TestConvertedPodsShareKeyLists: the records of the pods of 100 services x 10 hold only
// their own values: what the pods of a service share (labels, namespace, conditions,
// container statuses, phase, spec, apiVersion, kind) is held by their key lists, one
// metadata list per set of labels (100, not 900), one status list and one top-level list
// for all. The first pod of a service holds its labels itself (no other pod had them yet: a
// list fixing them would have been its own).
func TestConvertedPodsShareKeyLists(t *testing.T) {
	var c PodConverter
	lists := map[string]map[*record.Keys]bool{"pod": {}, "metadata": {}, "status": {}}
	for s := range 100 {
		for p := range 10 {
			obj := c.Convert(scalePod(s, p, false)).Object()
			if p == 0 {
				continue
			}
			meta, _ := obj.Field("metadata").(*record.Record)
			status, _ := obj.Field("status").(*record.Record)
			for part, r := range map[string]*record.Record{"pod": obj, "metadata": meta, "status": status} {
				lists[part][r.Keys()] = true
				for i := range r.Len() {
					_, fixed := r.Keys().FixedValue(i)
					own := r.Key(i) == "name" || r.Key(i) == "uid" || r.Key(i) == "podIP" || r.Key(i) == "podIPs" ||
						r.Key(i) == "metadata" || r.Key(i) == "status"
					if fixed == own {
						t.Fatalf("%s.%s of pod %d/%d: fixed by its key list %v", part, r.Key(i), s, p, fixed)
					}
				}
			}
		}
	}
	if len(lists["pod"]) != 1 || len(lists["metadata"]) != 100 || len(lists["status"]) != 1 {
		t.Errorf("%d top-level key lists, %d metadata lists, %d status lists; want 1, 100, 1",
			len(lists["pod"]), len(lists["metadata"]), len(lists["status"]))
	}
}

// dataOf is the data word of an any: where its value is.
func dataOf(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }

// TestConvertedPodsWithOwnLabelsShareKeyLists: pods whose labels are their own (a
// StatefulSet's: its pod-name label) hold their labels themselves, and share one metadata
// key list, not a list each fixing labels no other pod has.
func TestConvertedPodsWithOwnLabelsShareKeyLists(t *testing.T) {
	var c PodConverter
	lists := map[*record.Keys]bool{}
	for p := range 100 {
		pod := scalePod(7, p, false)
		pod.Labels = map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": pod.Name}
		meta, _ := c.Convert(pod).Object().Field("metadata").(*record.Record)
		lists[meta.Keys()] = true
	}
	if len(lists) > 2 {
		t.Errorf("100 pods with labels of their own: %d metadata key lists, want 2 at most", len(lists))
	}
}
