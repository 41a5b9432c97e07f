package snapshot

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

var (
	ingressGVK = networkingv1.SchemeGroupVersion.WithKind("Ingress")
	sliceGVK   = discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	nodeGVK    = corev1.SchemeGroupVersion.WithKind("Node")
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
)

var created = metav1.NewTime(time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC))

func ingress(namespace, name, host, service string) *networkingv1.Ingress {
	class := "haproxy-sidecar"
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			CreationTimestamp: created, Labels: map[string]string{"team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
		},
	}
}

// endpointSlice is a slice of service with one ready endpoint on each node, with addresses
// unique to the slice's name.
func endpointSlice(namespace, name, service string, nodes ...string) *discoveryv1.EndpointSlice {
	yes := true
	port, proto, portName := int32(8080), corev1.ProtocolTCP, "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "9",
			CreationTimestamp: created, Labels: map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for i, n := range nodes {
		h := fnv.New32a()
		h.Write([]byte(namespace + "/" + name))
		sum := h.Sum32()
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", sum>>16&0xff, sum>>8&0xff, (int(sum)+i)&0xff)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes}, NodeName: &n})
	}
	return s
}

func node(name, ip string, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "11", CreationTimestamp: created,
			Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": name}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
		Status: corev1.NodeStatus{
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", LastHeartbeatTime: created, LastTransitionTime: created}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
		},
	}
}

// typedReference is what a watched object must be: ToUnstructured without managedFields, with
// apiVersion and kind.
func typedReference(t testing.TB, obj kruntime.Object, gvk schema.GroupVersionKind) map[string]any {
	t.Helper()
	cp := obj.DeepCopyObject()
	if m, ok := cp.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	u, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(cp)
	if err != nil {
		t.Fatal(err)
	}
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return u
}

// asUnstructured is obj as the API server sends it in JSON, decoded as client-go's dynamic
// client decodes it.
func asUnstructured(t testing.TB, obj kruntime.Object, gvk schema.GroupVersionKind) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(append([]byte(`{"apiVersion":"`+gvk.GroupVersion().String()+`","kind":"`+gvk.Kind+`",`), b[1:]...)); err != nil {
		t.Fatal(err)
	}
	return u.Object
}

func TestObjectConverterMatchesKubectl(t *testing.T) {
	cases := []struct {
		name string
		obj  kruntime.Object
		gvk  schema.GroupVersionKind
	}{
		{"ingress", ingress("web", "shop", "shop.example.com", "shop"), ingressGVK},
		{"endpointslice", endpointSlice("web", "shop-abc", "shop", "node-1", "node-2"), sliceGVK},
		{"node", node("node-1", "192.168.0.1", true), nodeGVK},
		{"pod", everything(), podGVK},
		{"random pod", randomPod(7, 0), podGVK},
		{"another random pod", randomPod(8, 0.3), podGVK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if p, ok := c.obj.(*corev1.Pod); ok && p.Name == "" {
				p.Name = "x"
			}
			want := typedReference(t, c.obj, c.gvk)
			before := c.obj.DeepCopyObject()
			var conv ObjectConverter
			typed, err := conv.FromTyped(c.obj, c.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(c.name, typed.Record(), want); d != "" {
				t.Errorf("FromTyped: %s", d)
			}
			if !reflect.DeepEqual(before, c.obj) {
				t.Error("FromTyped changed the object it was given")
			}
			u := asUnstructured(t, c.obj, c.gvk)
			plain, err := conv.FromUnstructured(u)
			if err != nil {
				t.Fatal(err)
			}
			// The JSON the API server sends is ToUnstructured's result (no managedFields
			// here: FromUnstructured drops them).
			if d := firstDiff(c.name, plain.Record(), want); d != "" {
				t.Errorf("FromUnstructured: %s", d)
			}
			meta := c.obj.(metav1.Object)
			if plain.Namespace() != meta.GetNamespace() || plain.Name() != meta.GetName() || plain.Kind() != c.gvk.Kind ||
				plain.ResourceVersion() != meta.GetResourceVersion() {
				t.Errorf("identity %q %q %q %q", plain.Namespace(), plain.Name(), plain.Kind(), plain.ResourceVersion())
			}
		})
	}
}

func TestObjectKeys(t *testing.T) {
	var conv ObjectConverter
	n, err := conv.FromTyped(node("node-1", "192.168.0.1", true), nodeGVK)
	if err != nil {
		t.Fatal(err)
	}
	if n.Key() != "node-1" || n.Namespace() != "" || n.Name() != "node-1" {
		t.Errorf("cluster-scoped: key %q namespace %q name %q", n.Key(), n.Namespace(), n.Name())
	}
	i, _ := conv.FromTyped(ingress("web", "shop", "h", "s"), ingressGVK)
	if i.Key() != "web/shop" || i.Namespace() != "web" || i.Name() != "shop" {
		t.Errorf("namespaced: key %q namespace %q name %q", i.Key(), i.Namespace(), i.Name())
	}
	if _, err := conv.FromUnstructured(map[string]any{"kind": "X", "metadata": map[string]any{}}); err == nil {
		t.Error("an object without a name converted")
	}
	if _, err := conv.FromUnstructured(map[string]any{"metadata": map[string]any{"name": "x"}, "ch": make(chan int)}); err == nil {
		t.Error("a value that is not JSON converted")
	}
}

func TestObjectSharing(t *testing.T) {
	var conv ObjectConverter
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	at := func(o *Object, path string) any {
		var v any = o.Record()
		for _, k := range strings.Split(path, ".") {
			v, _ = v.(*record.Record).Get(k)
		}
		return v
	}
	for _, how := range []string{"typed", "unstructured"} {
		t.Run(how, func(t *testing.T) {
			conv := func(obj kruntime.Object) *Object {
				var o *Object
				var err error
				if how == "typed" {
					o, err = conv.FromTyped(obj, sliceGVK)
				} else {
					o, err = conv.FromUnstructured(asUnstructured(t, obj, sliceGVK))
				}
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			a := conv(endpointSlice("web", "shop-a", "shop", "n1"))
			b := conv(endpointSlice("web", "shop-b", "shop", "n2"))
			if !same(at(a, "metadata.labels"), at(b, "metadata.labels")) || !same(at(a, "ports"), at(b, "ports")) {
				t.Error("equal labels and ports are not shared")
			}
			if same(at(a, "endpoints"), at(b, "endpoints")) || same(at(a, "metadata"), at(b, "metadata")) {
				t.Error("parts that differ are shared")
			}
			if !at(a, "metadata").(*record.Record).SameKeys(at(b, "metadata").(*record.Record)) {
				t.Error("the metadata of two slices do not share their key list")
			}
			if !same(at(a, "metadata.namespace"), at(b, "metadata.namespace")) {
				t.Error("the namespace string is not shared")
			}
		})
	}
}

func TestAssembleResources(t *testing.T) {
	var conv ObjectConverter
	obj := func(o kruntime.Object, gvk schema.GroupVersionKind) *Object {
		x, err := conv.FromTyped(o, gvk)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	specs := watchspec.List{}
	for _, s := range []string{
		"ingresses.v1.networking.k8s.io;index=host=field:spec.rules.host",
		"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name;index=node=field:endpoints.nodeName",
		"nodes.v1",
		"crontabs.v1.example.com",
	} {
		if err := specs.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	objs := &Objects{Resources: map[string][]*Object{
		// Out of order; "a-b" sorts after "a" by namespace although "a-b/x" < "a/x" as strings.
		"ingresses": {
			obj(ingress("a-b", "x", "one.example.com", "s"), ingressGVK),
			obj(ingress("a", "y", "two.example.com", "s"), ingressGVK),
			obj(ingress("a", "x", "one.example.com", "s"), ingressGVK),
		},
		"endpointslices": {
			obj(endpointSlice("web", "shop-2", "shop", "n2"), sliceGVK),
			obj(endpointSlice("web", "shop-1", "shop", "n1", "n2", "n1"), sliceGVK),
			obj(endpointSlice("other", "shop-1", "shop", "n3"), sliceGVK),
			obj(endpointSlice("web", "api-1", "api", "n1"), sliceGVK),
		},
		"nodes": {obj(node("n2", "192.168.0.2", true), nodeGVK), obj(node("n1", "192.168.0.1", false), nodeGVK)},
	}}
	snap, err := Assemble(objs, Options{Resources: specs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(snap.Resources); got != 4 {
		t.Fatalf("%d resources, want 4 (one empty)", got)
	}
	value := func(name string) *record.Record {
		for _, r := range snap.Resources {
			if r.Name == name {
				return r.Value
			}
		}
		t.Fatalf("no resource %s", name)
		return nil
	}
	names := func(v any) string {
		var out []string
		for _, o := range v.([]any) {
			m, _ := o.(*record.Record).Get("metadata")
			ns, _ := m.(*record.Record).Get("namespace")
			n, _ := m.(*record.Record).Get("name")
			if ns != nil {
				out = append(out, ns.(string)+"/"+n.(string))
			} else {
				out = append(out, n.(string))
			}
		}
		return strings.Join(out, " ")
	}
	get := func(r *record.Record, path ...string) any {
		var v any = r
		for _, k := range path {
			var ok bool
			if v, ok = v.(*record.Record).Get(k); !ok {
				t.Fatalf("no %q in %v", k, path)
			}
		}
		return v
	}
	ing := value("ingresses")
	if got := names(get(ing, "all")); got != "a/x a/y a-b/x" {
		t.Errorf("ingresses.all: %s", got)
	}
	if got := names(get(ing, "by_host", "a/one.example.com")); got != "a/x" {
		t.Errorf("by_host[a/one.example.com]: %s", got)
	}
	if got := names(get(ing, "by_host", "a-b/one.example.com")); got != "a-b/x" {
		t.Errorf("by_host[a-b/one.example.com]: %s", got)
	}
	if got := get(ing, "by_name", "a-b/x"); got != get(ing, "all").([]any)[2] {
		t.Error("by_name does not give the object all has")
	}
	es := value("endpointslices")
	if got := names(get(es, "by_service", "web/shop")); got != "web/shop-1 web/shop-2" {
		t.Errorf("by_service[web/shop]: %s", got)
	}
	if got := names(get(es, "by_service", "other/shop")); got != "other/shop-1" {
		t.Errorf("by_service[other/shop]: %s", got)
	}
	// A list on the path is walked; an object is listed once per value.
	if got := names(get(es, "by_node", "web/n1")); got != "web/api-1 web/shop-1" {
		t.Errorf("by_node[web/n1]: %s", got)
	}
	if got := names(get(es, "by_node", "web/n2")); got != "web/shop-1 web/shop-2" {
		t.Errorf("by_node[web/n2]: %s", got)
	}
	nodes := value("nodes")
	if got := names(get(nodes, "all")); got != "n1 n2" {
		t.Errorf("nodes.all: %s", got)
	}
	if _, ok := get(nodes, "by_name").(*record.Record).Get("n2"); !ok {
		t.Error("a cluster-scoped object is not by_name[name]")
	}
	empty := value("crontabs")
	if len(get(empty, "all").([]any)) != 0 || get(empty, "by_name").(*record.Record).Len() != 0 {
		t.Error("a resource without objects is not empty")
	}
	if snap2, _ := Assemble(objs, Options{}, nil); snap2.Resources != nil {
		t.Error("resources without --watch")
	}
}

func TestFieldValues(t *testing.T) {
	rec := record.Of(nil, map[string]any{
		"spec": map[string]any{"port": int64(80), "on": true, "ratio": 0.5, "hosts": []any{"a", "b", map[string]any{}},
			"rules": []any{map[string]any{"host": "x"}, map[string]any{"host": "y"}, map[string]any{}}},
	}).(*record.Record)
	for _, c := range []struct {
		path string
		want string
	}{
		{"spec.port", "80"},
		{"spec.on", "true"},
		{"spec.ratio", "0.5"},
		{"spec.hosts", "a b"},
		{"spec.rules.host", "x y"},
		{"spec", ""},
		{"spec.port.x", ""},
		{"nothing.here", ""},
	} {
		if got := strings.Join(fieldValues(rec, strings.Split(c.path, "."), nil), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
}

func TestObjectsWithout(t *testing.T) {
	var conv ObjectConverter
	ing, _ := conv.FromTyped(ingress("web", "shop", "h", "s"), ingressGVK)
	other, _ := conv.FromTyped(ingress("web", "api", "h", "s"), ingressGVK)
	watchedPod, _ := conv.FromTyped(readyPod("web", "p", "10.0.0.1", nil), podGVK)
	objs := &Objects{
		Pods:      []*corev1.Pod{readyPod("web", "p", "10.0.0.1", nil), readyPod("web", "q", "10.0.0.2", nil)},
		Resources: map[string][]*Object{"ingresses": {ing, other}, "pods": {watchedPod}},
	}
	out, ok := objs.Without(Ref{Kind: "Ingress", Namespace: "web", Name: "shop"})
	if !ok || len(out.Resources["ingresses"]) != 1 || out.Resources["ingresses"][0] != other {
		t.Fatalf("Without the ingress: %v %v", ok, out.Resources)
	}
	if len(objs.Resources["ingresses"]) != 2 || objs.Resources["ingresses"][0] != ing {
		t.Error("Without changed the objects it was given")
	}
	out, ok = objs.Without(Ref{Kind: "Pod", Namespace: "web", Name: "p"})
	if !ok || len(out.Pods) != 1 || out.Pods[0].Name != "q" || len(out.Resources["pods"]) != 0 {
		t.Errorf("Without the pod: %v pods %d watched %d", ok, len(out.Pods), len(out.Resources["pods"]))
	}
	if len(objs.Pods) != 2 {
		t.Error("Without changed the pods it was given")
	}
	for _, ref := range []Ref{
		{Kind: "Ingress", Namespace: "web", Name: "nope"},
		{Kind: "Service", Namespace: "web", Name: "shop"},
		{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "shop"},
	} {
		if _, ok := objs.Without(ref); ok {
			t.Errorf("Without(%v) found something", ref)
		}
	}
}

// BenchmarkWatchedObjectMemory measures what 10,000 objects keep in memory once converted
// (live-B/obj), each decoded from its JSON as a source reads it (so its strings count) and
// converted with one converter (so its table of shared parts counts): pods through PodConverter
// (what the services' pods cost) against the same pods watched (--watch pods.v1), typed (the
// etcd and file sources decode built-in kinds into their Go types) and from JSON (the kube
// source's dynamic informers, custom resources everywhere); then EndpointSlices, Ingresses and
// Nodes.
func BenchmarkWatchedObjectMemory(b *testing.B) {
	const n = 10_000
	type gen struct {
		name string
		gvk  schema.GroupVersionKind
		make func(i int) kruntime.Object
	}
	gens := []gen{
		{"pods", podGVK, func(i int) kruntime.Object {
			p := readyPod("shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250), map[string]string{"app": "web", "pod-template-hash": "abc"})
			p.ResourceVersion = fmt.Sprint(1000 + i)
			return p
		}},
		{"endpointslices", sliceGVK, func(i int) kruntime.Object {
			return endpointSlice("shop", fmt.Sprintf("svc-%d-abcde", i), fmt.Sprintf("svc-%d", i), fmt.Sprintf("node-%d", i%50), fmt.Sprintf("node-%d", (i+1)%50))
		}},
		{"ingresses", ingressGVK, func(i int) kruntime.Object {
			return ingress("shop", fmt.Sprintf("ing-%d", i), fmt.Sprintf("host-%d.example.com", i), fmt.Sprintf("svc-%d", i))
		}},
		{"nodes", nodeGVK, func(i int) kruntime.Object {
			return node(fmt.Sprintf("node-%d", i), fmt.Sprintf("192.168.%d.%d", i/250, i%250), true)
		}},
	}
	live := func(b *testing.B, convert func(i int) any) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		out := make([]any, n)
		for i := range out {
			out[i] = convert(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n-16, "live-B/obj") // less out's own slot
		runtime.KeepAlive(out)
	}
	for _, g := range gens {
		data := make([][]byte, n)
		for i := range data {
			obj := g.make(i)
			u := asUnstructured(b, obj, g.gvk)
			var err error
			if data[i], err = json.Marshal(u); err != nil {
				b.Fatal(err)
			}
		}
		typed := func(i int) kruntime.Object {
			obj, err := scheme.Scheme.New(g.gvk)
			if err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(data[i], obj); err != nil {
				b.Fatal(err)
			}
			return obj
		}
		if g.name == "pods" {
			b.Run("pods/PodConverter", func(b *testing.B) {
				for b.Loop() {
					var conv PodConverter
					live(b, func(i int) any { return conv.Convert(typed(i).(*corev1.Pod)) })
				}
			})
		}
		b.Run(g.name+"/typed", func(b *testing.B) {
			for b.Loop() {
				var conv ObjectConverter
				live(b, func(i int) any {
					o, err := conv.FromTyped(typed(i), g.gvk)
					if err != nil {
						b.Fatal(err)
					}
					return o
				})
			}
		})
		b.Run(g.name+"/json", func(b *testing.B) {
			for b.Loop() {
				var conv ObjectConverter
				live(b, func(i int) any {
					u := &unstructured.Unstructured{}
					if err := u.UnmarshalJSON(data[i]); err != nil {
						b.Fatal(err)
					}
					o, err := conv.FromUnstructured(u.Object)
					if err != nil {
						b.Fatal(err)
					}
					return o
				})
			}
		})
	}
}

// BenchmarkAssembleResources is the per-sync cost of 10,000 watched EndpointSlices: sorting
// them and building by_name and one index.
func BenchmarkAssembleResources(b *testing.B) {
	var conv ObjectConverter
	var specs watchspec.List
	if err := specs.Set("endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"); err != nil {
		b.Fatal(err)
	}
	objs := &Objects{Resources: map[string][]*Object{}}
	for i := range 10_000 {
		o, err := conv.FromTyped(endpointSlice(fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("svc-%d-abcde", i), fmt.Sprintf("svc-%d", i/2), "n1"), sliceGVK)
		if err != nil {
			b.Fatal(err)
		}
		objs.Resources["endpointslices"] = append(objs.Resources["endpointslices"], o)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := assembleResources(specs, objs.Resources, nil); len(res[0].Objects) != 10_000 {
			b.Fatal(len(res[0].Objects))
		}
	}
}

// TestWithoutStatusAndSameExceptVersion: an object without its status (status=off) keeps
// everything else; two versions of an object are the same but for their resourceVersion only
// when nothing else differs, at any depth.
func TestWithoutStatusAndSameExceptVersion(t *testing.T) {
	var c ObjectConverter
	obj := func(rv, host, cond string) *Object {
		o, err := c.FromUnstructured(map[string]any{"apiVersion": "v1", "kind": "Route",
			"metadata": map[string]any{"name": "r", "namespace": "web", "resourceVersion": rv, "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"hostnames": []any{host}},
			"status":   map[string]any{"parents": []any{map[string]any{"conditions": []any{map[string]any{"type": cond}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	withoutStatus := func(o *Object) *Object { return o.WithStatus(func(string) bool { return false }) }
	a := obj("1", "a.example", "Accepted")
	if _, ok := withoutStatus(a).Record().Get("status"); ok {
		t.Fatal("status left in")
	}
	if spec, _ := withoutStatus(a).Record().Get("spec"); spec == nil || withoutStatus(a).Key() != "web/r" {
		t.Fatal("the rest is not kept")
	}
	if b := obj("2", "a.example", "Programmed"); !SameExceptVersion(withoutStatus(a), withoutStatus(b)) || SameExceptVersion(a, b) {
		t.Error("a status write is a change only with the status in")
	}
	if b := obj("2", "b.example", "Accepted"); SameExceptVersion(withoutStatus(a), withoutStatus(b)) {
		t.Error("a spec change is not seen")
	}
	if !SameExceptVersion(a, obj("3", "a.example", "Accepted")) {
		t.Error("a new resourceVersion alone is a change")
	}
}

// TestWithStatusKeepsTheFieldsNamed: ;status=FIELD,... leaves those fields of the status and
// nothing else of it; a write of another field is then no change templates see.
func TestWithStatusKeepsTheFieldsNamed(t *testing.T) {
	var c ObjectConverter
	obj := func(rv, addr, cond string) *Object {
		o, err := c.FromUnstructured(map[string]any{"apiVersion": "v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "g", "namespace": "web", "resourceVersion": rv},
			"spec":     map[string]any{"gatewayClassName": "haproxy"},
			"status": map[string]any{"addresses": []any{map[string]any{"value": addr}},
				"conditions": []any{map[string]any{"type": cond}}}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	addresses := func(f string) bool { return f == "addresses" }
	a := obj("1", "10.0.0.1", "Accepted")
	st, _ := a.WithStatus(addresses).Record().Get("status")
	r, ok := st.(*record.Record)
	if !ok || r.Len() != 1 {
		t.Fatalf("status = %v, want addresses alone", st)
	}
	if _, ok := r.Get("addresses"); !ok {
		t.Fatal("addresses not kept")
	}
	if spec, _ := a.WithStatus(addresses).Record().Get("spec"); spec == nil {
		t.Fatal("the rest is not kept")
	}
	if a.WithStatus(func(string) bool { return true }) != a {
		t.Error("keeping every field is not the object itself")
	}
	if b := obj("2", "10.0.0.1", "Programmed"); !SameExceptVersion(a.WithStatus(addresses), b.WithStatus(addresses)) {
		t.Error("a write of a field not kept is a change")
	}
	if b := obj("2", "10.0.0.2", "Accepted"); SameExceptVersion(a.WithStatus(addresses), b.WithStatus(addresses)) {
		t.Error("a change of a kept field is not seen")
	}
	none := a.WithStatus(func(f string) bool { return f == "listeners" })
	if _, ok := none.Record().Get("status"); ok {
		t.Error("a status with no field kept is left in")
	}
}

// TestEcho: a version that differs from the one held in its resourceVersion alone (the echo
// of a status write, with ;status=off) is the held one's values, the very same records, with
// its own resourceVersion: what the renderer kept from them is found by identity. Any other
// difference, at any depth, keeps the new version as it is.
func TestEcho(t *testing.T) {
	// Each version converted by a converter of its own: none shares the other's parts (as
	// at scale, where the converter has long forgotten them).
	obj := func(rv, host string) *Object {
		var c ObjectConverter
		o, err := c.FromUnstructured(map[string]any{"apiVersion": "v1", "kind": "Route",
			"metadata": map[string]any{"name": "r", "namespace": "web", "resourceVersion": rv, "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"hostnames": []any{host}, "rules": []any{map[string]any{"matches": []any{map[string]any{"path": "/"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	field := func(o *Object, path ...string) any {
		var v any = o.Record()
		for _, k := range path {
			v, _ = v.(*record.Record).Get(k)
		}
		return v
	}
	held := obj("1", "a.example")
	echo := Echo(held, obj("2", "a.example"))
	if field(echo, "spec") != field(held, "spec") || field(echo, "metadata", "labels") != field(held, "metadata", "labels") {
		t.Error("the echo's spec and labels are not the held version's records")
	}
	if echo.ResourceVersion() != "2" || held.ResourceVersion() != "1" || echo.Key() != "web/r" || echo.Name() != "r" {
		t.Errorf("echo: resourceVersion %q (held %q), key %q; want 2 (1), web/r", echo.ResourceVersion(), held.ResourceVersion(), echo.Key())
	}
	if !SameExceptVersion(echo, obj("2", "a.example")) || echo.ResourceVersion() != obj("2", "a.example").ResourceVersion() {
		t.Error("the echo is not equal to the version it stands for")
	}
	if Echo(held, obj("1", "a.example")) != held {
		t.Error("the same version again (a relist) is not the held object itself")
	}
	changed := obj("3", "b.example")
	if Echo(held, changed) != changed || Echo(nil, changed) != changed {
		t.Error("a changed spec, or nothing held, is not the new version as it is")
	}
}

// BenchmarkAssembleThreeLists is the per-sync cost of three watched resources of 10,000
// objects each (Ingresses, Services, EndpointSlices with an index, in 20 namespaces), given in
// an informer store's order (shuffled) or already in the order Assemble wants, as the kube
// source gives them since issue 25.
func BenchmarkAssembleThreeLists(b *testing.B) {
	var conv ObjectConverter
	var specs watchspec.List
	for _, s := range []string{"ingresses.v1.networking.k8s.io", "services.v1.",
		"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"} {
		if err := specs.Set(s); err != nil {
			b.Fatal(err)
		}
	}
	sorted := map[string][]*Object{}
	for i := range 10_000 {
		ns, name := fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("svc-%05d", i)
		for _, x := range []struct {
			res string
			obj kruntime.Object
			gvk schema.GroupVersionKind
		}{
			{"ingresses", ingress(ns, name, name+".example", name), ingressGVK},
			{"services", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "9"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, corev1.SchemeGroupVersion.WithKind("Service")},
			{"endpointslices", endpointSlice(ns, name+"-abcde", name, "n1"), sliceGVK},
		} {
			o, err := conv.FromTyped(x.obj, x.gvk)
			if err != nil {
				b.Fatal(err)
			}
			sorted[x.res] = append(sorted[x.res], o)
		}
	}
	shuffled := map[string][]*Object{}
	for res, l := range sorted {
		slices.SortFunc(l, compareObjects)
		s := slices.Clone(l)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		shuffled[res] = s
	}
	for _, c := range []struct {
		name string
		objs map[string][]*Object
	}{{"store-order", shuffled}, {"sorted", sorted}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res := assembleResources(specs, c.objs, nil); len(res) != 3 || len(res[2].Objects) != 10_000 {
					b.Fatal(len(res))
				}
			}
		})
	}
	// Through a cache, each sync with one object of one resource changed (a new version: a new
	// pointer, as a source gives), the others the same lists.
	for _, res := range []string{"ingresses", "endpointslices"} {
		b.Run("sorted-cached-one-"+res+"-changed", func(b *testing.B) {
			var cache PodCache
			versions := [2]map[string][]*Object{sorted, maps.Clone(sorted)}
			l := slices.Clone(sorted[res])
			c := *l[5000]
			l[5000] = &c
			versions[1][res] = l
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if res := assembleResources(specs, versions[i%2], &cache); len(res) != 3 || len(res[2].Objects) != 10_000 {
					b.Fatal(len(res))
				}
			}
		})
	}
	// Through a cache, each sync with a route added to or taken from the middle of each list
	// (a new key in by_name and in the index), as a new Ingress to a new Service.
	b.Run("sorted-cached-route-added", func(b *testing.B) {
		var cache PodCache
		added := map[string][]*Object{}
		ns, name := "ns-7", "svc-05007-n"
		for res, x := range map[string]kruntime.Object{
			"ingresses":      ingress(ns, name, name+".example", name),
			"services":       &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "9"}},
			"endpointslices": endpointSlice(ns, name+"-abcde", name, "n1"),
		} {
			gvk := map[string]schema.GroupVersionKind{"ingresses": ingressGVK, "services": corev1.SchemeGroupVersion.WithKind("Service"), "endpointslices": sliceGVK}[res]
			o, err := conv.FromTyped(x, gvk)
			if err != nil {
				b.Fatal(err)
			}
			at, _ := slices.BinarySearchFunc(sorted[res], o, compareObjects)
			added[res] = slices.Insert(slices.Clone(sorted[res]), at, o)
		}
		versions := [2]map[string][]*Object{sorted, added}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if res := assembleResources(specs, versions[i%2], &cache); len(res) != 3 || len(res[2].Objects) != 10_000+i%2 {
				b.Fatal(len(res))
			}
		}
	})
}
