package snapshot

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scalePod is pod p of service s as hack/gen-scale writes it (the 10,000 services x 10 pods
// of docs/performance.md); kube adds what a cluster's pod has beside (resourceVersion, times,
// node and host IP).
func scalePod(s, p int, kube bool) *corev1.Pod {
	name := fmt.Sprintf("svc-%05d", s)
	ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, p+1)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", name, p), Namespace: fmt.Sprintf("ns-%03d", s%100),
			UID:    types.UID(fmt.Sprintf("uid-%d-%d", s, p)),
			Labels: map[string]string{"app": name, "pod-template-hash": "5c6b7d9f"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example.com/app:1.0"}},
		},
	}
	if kube {
		start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(s*10+p) * time.Second))
		pod.ResourceVersion = strconv.Itoa(1000000 + s*10 + p)
		pod.CreationTimestamp = start
		pod.Spec.NodeName = fmt.Sprintf("node-%d", s%50)
		pod.Status.HostIP = fmt.Sprintf("192.168.0.%d", s%50)
		pod.Status.StartTime = &start
	}
	return pod
}

// convertedHeap converts n pods of the shape of scalePod with one converter, as a source does
// at 10,000 x 10, and returns the heap they hold once collected and the allocations of a
// conversion, both per pod.
func convertedHeap(n int, kube bool) (bytes, allocs float64) {
	typed := make([]*corev1.Pod, n)
	for i := range typed {
		typed[i] = scalePod(i/10, i%10, kube)
	}
	var c PodConverter
	out := make([]*Pod, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, p := range typed {
		out[i] = c.Convert(p)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(typed)
	runtime.KeepAlive(out)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), float64(after.Mallocs-before.Mallocs) / float64(n)
}

// BenchmarkConvertedPodHeap: the heap a converted pod holds (live-B/pod, the converter's
// shared parts included) and the allocations of its conversion (allocs/pod), over 100,000
// pods of the shape hack/gen-scale writes (docs/performance.md, 10,000 services x 10 pods).
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
