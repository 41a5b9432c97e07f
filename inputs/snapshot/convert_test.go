package snapshot

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/randfill"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// reference is what podToMap must give: ToUnstructured without managedFields, plus
// apiVersion and kind.
func reference(t testing.TB, p *corev1.Pod) map[string]any {
	t.Helper()
	shallow := *p
	shallow.ManagedFields = nil
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&shallow)
	if err != nil {
		t.Fatalf("ToUnstructured: %v", err)
	}
	m["apiVersion"] = "v1"
	m["kind"] = "Pod"
	return m
}

// firstDiff names the first path where a and b differ ("" when DeepEqual).
func firstDiff(path string, a, b any) string {
	a, b = record.Plain(a), record.Plain(b)
	if reflect.DeepEqual(a, b) {
		return ""
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if d := firstDiff(path+"."+k, am[k], bm[k]); d != "" {
				return d
			}
		}
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i]); d != "" {
				return d
			}
		}
	}
	return fmt.Sprintf("%s: got %#v, want %#v", path, a, b)
}

// checkConversion converts p with and without sharing and compares both with the reference;
// the fast path must have been taken (no fallback to ToUnstructured).
func checkConversion(t *testing.T, p *corev1.Pod) {
	t.Helper()
	want := reference(t, p)
	shallow := *p
	shallow.ManagedFields = nil
	if _, err := toUnstructured(&shallow, nil, nil); err != nil {
		t.Fatalf("the fast converter gave up: %v", err)
	}
	for _, in := range []*interner{nil, {}} {
		for _, place := range []*ownPlace{nil, {copy: true}} {
			got := podToMap(p, in, place)
			if d := firstDiff("pod", got, want); d != "" {
				t.Fatalf("sharing=%v, place=%+v: %s", in != nil, place, d)
			}
		}
	}
}

// everything is a pod with at least one value in every kind of field the converter treats
// differently: times, quantities, int-or-strings, pointers, nil and empty maps and slices,
// byte slices, floats, unsigned integers.
func everything() *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC))
	grace := int64(30)
	yes := true
	port := intstr.FromInt32(8080)
	named := intstr.FromString("http")
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: now, DeletionGracePeriodSeconds: &grace,
			Labels:      map[string]string{"app": "web", "pod-template-hash": "abc"},
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc",
				UID: "rs-1", Controller: &yes, BlockOwnerDeletion: &yes}},
			Finalizers:    []string{},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      "node-1",
			TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: resource.NewQuantity(1<<30, resource.BinarySI)}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27", Args: nil, Command: []string{},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP, Name: "http"}},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: port}},
					PeriodSeconds: 5},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: named}}},
			}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: &grace}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			HostIP: "192.168.0.1", StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2, Started: &yes,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		},
	}
}

func TestPodToMapMatchesToUnstructured(t *testing.T) {
	cases := map[string]*corev1.Pod{
		"empty":      {},
		"ready pod":  readyPod("shop", "web-0", "10.0.0.1", map[string]string{"app": "web"}),
		"everything": everything(),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) { checkConversion(t, p) })
	}
	t.Run("byte slices as base64", func(t *testing.T) {
		type withBytes struct {
			Data  []byte            `json:"data"`
			Nil   []byte            `json:"nil"`
			Empty []byte            `json:"empty,omitempty"`
			Map   map[string][]byte `json:"map"`
		}
		v := &withBytes{Data: []byte("hello\x00"), Empty: []byte{}, Map: map[string][]byte{"k": []byte("v")}}
		got, err := toUnstructured(v, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(v)
		if err != nil {
			t.Fatal(err)
		}
		if d := firstDiff("v", got, want); d != "" {
			t.Error(d)
		}
	})
	t.Run("unsigned overflow is an error, as in ToUnstructured", func(t *testing.T) {
		type big struct {
			N uint64 `json:"n"`
		}
		if _, err := toUnstructured(&big{N: 1 << 63}, nil, nil); err == nil {
			t.Error("no error for a uint64 above MaxInt64")
		}
		got, err := toUnstructured(&big{N: 7}, nil, nil)
		if n, _ := got.Get("n"); err != nil || n != int64(7) {
			t.Errorf("got %#v, %v; want n: int64(7)", got, err)
		}
	})
}

// randomPod fills every field of a pod at random, with the value generators apimachinery's
// own round-trip tests use for metadata and quantities. nilChance 0 sets every pointer, slice
// and map.
func randomPod(seed int64, nilChance float64) *corev1.Pod {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs).
		NilChance(nilChance).NumElements(0, 3).
		Funcs(func(s *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*s = intstr.FromInt32(c.Int31())
			} else {
				*s = intstr.FromString(c.String(8))
			}
		})
	p := &corev1.Pod{}
	f.Fill(p)
	return p
}

func FuzzPodToMap(f *testing.F) {
	for seed := range int64(40) {
		f.Add(seed, seed%4 == 0)
	}
	f.Fuzz(func(t *testing.T, seed int64, allSet bool) {
		nilChance := 0.3
		if allSet {
			nilChance = 0
		}
		checkConversion(t, randomPod(seed, nilChance))
	})
}

func TestPodToMapRandomPods(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 30
	}
	for seed := range int64(n) {
		for _, nilChance := range []float64{0, 0.5} {
			p := randomPod(seed, nilChance)
			t.Run(fmt.Sprintf("seed=%d nil=%v", seed, nilChance), func(t *testing.T) { checkConversion(t, p) })
		}
	}
}

func TestSharing(t *testing.T) {
	var conv PodConverter
	a := conv.Convert(readyPod("shop", "web-0", "10.0.0.1", map[string]string{"app": "web"})).Object()
	b := conv.Convert(readyPod("shop", "web-1", "10.0.0.2", map[string]string{"app": "web"})).Object()
	other := conv.Convert(readyPod("shop", "api-0", "10.0.0.3", map[string]string{"app": "api"})).Object()
	at := func(m *record.Record, path string) any {
		var v any = m
		for _, k := range strings.Split(path, ".") {
			v, _ = v.(*record.Record).Get(k)
		}
		return v
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	for _, path := range []string{"metadata.labels", "spec", "spec.containers", "status.conditions", "status.containerStatuses"} {
		if !same(at(a, path), at(b, path)) {
			t.Errorf("%s: equal in both pods but not shared", path)
		}
	}
	for _, path := range []string{"metadata", "status", "status.podIPs"} {
		if same(at(a, path), at(b, path)) {
			t.Errorf("%s: differs between the pods but is shared", path)
		}
	}
	if same(at(a, "metadata.labels"), at(other, "metadata.labels")) {
		t.Error("different labels are shared")
	}
	if !same(at(a, "spec"), at(other, "spec")) {
		t.Error("equal specs of pods with different labels are not shared")
	}
	for _, p := range []*corev1.Pod{readyPod("shop", "web-0", "10.0.0.1", map[string]string{"app": "web"}), everything()} {
		if d := firstDiff("pod", conv.Convert(p).Object(), reference(t, p)); d != "" {
			t.Errorf("shared conversion differs: %s", d)
		}
	}

	t.Run("values of different types are never shared", func(t *testing.T) {
		var in interner
		one := []kv{{k: "n", v: int64(1)}}
		h := mapHash(pairHash(hashString("n"), 1), 1) // the same hash for both: the check must tell
		m1 := in.mapOf(one, h, true, nil)
		m2 := in.mapOf([]kv{{k: "n", v: float64(1)}}, h, true, nil)
		m3 := in.mapOf([]kv{{k: "n", v: "1"}}, h, true, nil)
		m4 := in.mapOf([]kv{{k: "n", v: int64(1)}}, h, true, nil)
		if same(m1, m2) || same(m1, m3) || same(m2, m3) {
			t.Error("maps with values of different types were shared")
		}
		if !same(m1, m4) {
			t.Error("equal maps with the same hash were not shared")
		}
		if n2, _ := m2.Get("n"); n2 != float64(1) {
			t.Errorf("colliding records lost their values: %v %v", m2, m3)
		}
		if n3, _ := m3.Get("n"); n3 != "1" {
			t.Errorf("colliding maps lost their values: %#v %#v", m2, m3)
		}
	})

	t.Run("the table forgets what two rounds did not use", func(t *testing.T) {
		var conv PodConverter
		first := conv.Convert(readyPod("shop", "web-0", "10.0.0.1", map[string]string{"app": "web"})).Object()
		if conv.in.len() == 0 {
			t.Fatal("nothing in the table after a conversion")
		}
		conv.NextRound()
		again := conv.Convert(readyPod("shop", "web-1", "10.0.0.2", map[string]string{"app": "web"})).Object()
		if !same(at(first, "metadata.labels"), at(again, "metadata.labels")) {
			t.Error("the last round's labels were not shared")
		}
		conv.NextRound()
		conv.NextRound()
		if n := conv.in.len(); n != 0 {
			t.Errorf("the table holds %d nodes after two rounds without conversions", n)
		}
	})
}

func TestIdentical(t *testing.T) {
	m := record.FromMap(nil, map[string]any{})
	l := []any{int64(1)}
	cases := []struct {
		a, b any
		want bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{int64(1), float64(1), false},
		{nil, nil, true},
		{nil, "", false},
		{m, m, true},
		{m, record.FromMap(nil, map[string]any{}), false},
		{m, "x", false},
		{"x", m, false},
		{l, l, true},
		{l, []any{int64(1)}, false},
		{[]any{}, []any{}, true},
		{[]any(nil), []any{}, false},
		{l, m, false},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := identical(c.a, c.b); got != c.want {
				t.Errorf("identical(%#v, %#v) = %v, want %v", c.a, c.b, got, c.want)
			}
		})
	}
}

// BenchmarkPodToMap converts the pods of a ReplicaSet: with ToUnstructured, with the plan,
// and with the plan and sharing. live-B/pod is the memory the converted pods keep.
func BenchmarkPodToMap(b *testing.B) {
	pods := make([]*corev1.Pod, 1000)
	for i := range pods {
		pods[i] = readyPod("shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250), map[string]string{"app": "web", "pod-template-hash": "abc"})
	}
	live := func(b *testing.B, convert func(*corev1.Pod) any) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out := make([]any, len(pods))
		for i, p := range pods {
			out[i] = convert(p)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(pods)), "live-B/pod")
		runtime.KeepAlive(out)
	}
	run := func(b *testing.B, convert func(*corev1.Pod) any) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			convert(pods[i%len(pods)])
			i++
		}
		live(b, convert)
	}
	b.Run("ToUnstructured", func(b *testing.B) {
		run(b, func(p *corev1.Pod) any {
			m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				b.Fatal(err)
			}
			return m
		})
	})
	b.Run("plan", func(b *testing.B) { run(b, func(p *corev1.Pod) any { return podToMap(p, nil, nil) }) })
	b.Run("plan+sharing", func(b *testing.B) {
		var in interner
		run(b, func(p *corev1.Pod) any { return podToMap(p, &in, nil) })
	})
}
