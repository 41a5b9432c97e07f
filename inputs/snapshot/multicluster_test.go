package snapshot

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// Two clusters with a pod of the same namespace and name: both feed the service, apart, each
// with its cluster's name; a service's clusters list keeps the pods of the clusters it names.
func TestServicesOfSeveralClusters(t *testing.T) {
	var conv PodConverter
	east := readyPod("shop", "web-0", "10.1.0.1", map[string]string{"app": "web"})
	west := readyPod("shop", "web-0", "10.2.0.1", map[string]string{"app": "web"})
	west.UID = types.UID("uid-west")
	westOnly := readyPod("shop", "web-1", "10.2.0.2", map[string]string{"app": "web"})
	objs := &Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap(ns, DefaultServicesConfigMap, map[string]string{
			"all":  `{"namespace":"shop","selector":{"app":"web"}}`,
			"west": `{"namespace":"shop","selector":{"app":"web"},"clusters":["west"]}`,
			"none": `{"namespace":"shop","selector":{"app":"web"},"clusters":[]}`,
		})},
		ConvertedPods: []*Pod{conv.ConvertIn(west, "west"), conv.ConvertIn(east, "east"), conv.ConvertIn(westOnly, "west")},
	}
	snap, err := Build(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods := func(svc string) map[string]string { // key -> cluster/IP
		for _, s := range snap.Services {
			if s.Field("name") != svc {
				continue
			}
			out := map[string]string{}
			for k, v := range s.Field("pods").(*record.Record).All() {
				p := v.(*record.Record)
				c, _ := p.Get("cluster")
				st, _ := p.Get("status")
				ip, _ := st.(*record.Record).Get("podIP")
				out[k] = c.(string) + "/" + ip.(string)
			}
			return out
		}
		t.Fatalf("no service %s", svc)
		return nil
	}
	want := map[string]string{"east:web-0": "east/10.1.0.1", "west:web-0": "west/10.2.0.1", "west:web-1": "west/10.2.0.2"}
	if got := pods("all"); !equalMaps(got, want) {
		t.Errorf("all: pods %v, want %v", got, want)
	}
	want = map[string]string{"west:web-0": "west/10.2.0.1", "west:web-1": "west/10.2.0.2"}
	if got := pods("west"); !equalMaps(got, want) {
		t.Errorf("west: pods %v, want %v", got, want)
	}
	if got := pods("none"); len(got) != 0 {
		t.Errorf("clusters []: pods %v, want none", got)
	}

	// A pod held at fault in one cluster leaves the other cluster's pod of that name in.
	ref := conv.ConvertIn(west, "west").Ref()
	if ObjectID(ref) != "pod/shop/web-0@west" {
		t.Errorf("ObjectID = %q", ObjectID(ref))
	}
	without, found := objs.Without(ref)
	if !found {
		t.Fatal("Without did not find the west pod")
	}
	snap, err = Build(without, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"east:web-0": "east/10.1.0.1", "west:web-1": "west/10.2.0.2"}
	if got := pods("all"); !equalMaps(got, want) {
		t.Errorf("without west's web-0: pods %v, want %v", got, want)
	}
	if ids := without.WithoutObjects(map[string]bool{"pod/shop/web-0@east": true}).ClusterObjects(); len(ids) != 1 || ids[0].ID() != "pod/shop/web-1@west" {
		t.Errorf("WithoutObjects by cluster left %v", ids)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A bad clusters list is the service's error; one cluster keeps the context as it was (no
// "cluster" key, pods by name).
func TestServiceClustersChecked(t *testing.T) {
	for _, text := range []string{
		`{"namespace":"shop","selector":{"app":"web"},"clusters":"east"}`,
		`{"namespace":"shop","selector":{"app":"web"},"clusters":[1]}`,
		`{"namespace":"shop","selector":{"app":"web"},"clusters":["East_1"]}`,
	} {
		_, _, err := decodeService(Ref{Kind: "ConfigMap", Name: "services", Key: "web"}, []byte(text))
		if err == nil || !strings.Contains(err.Error(), `"clusters"`) {
			t.Errorf("%s: error %v, want one about clusters", text, err)
		}
	}
	var conv PodConverter
	p := conv.Convert(readyPod("shop", "web-0", "10.1.0.1", map[string]string{"app": "web"}))
	if _, ok := p.Object().Get("cluster"); ok || p.Cluster() != "" {
		t.Error("a pod of the one cluster has a cluster")
	}
}

// resources.X with several clusters: all has every cluster's objects, by_name the first
// cluster's of a name, by_cluster each cluster's own lookups.
func TestResourcesByCluster(t *testing.T) {
	var conv ObjectConverter
	obj := func(cluster, namespace, name string) *Object {
		o, err := conv.FromUnstructured(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": namespace, "name": name}})
		if err != nil {
			t.Fatal(err)
		}
		return conv.InCluster(o, cluster)
	}
	specs := watchspec.List{}
	if err := specs.Set("configmaps.v1"); err != nil {
		t.Fatal(err)
	}
	objs := &Objects{Resources: map[string][]*Object{"configmaps": {
		obj("west", "a", "x"), obj("east", "a", "x"), obj("east", "b", "y"),
	}}}
	snap, err := Assemble(objs, Options{Resources: specs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := snap.Resources[0].Value
	clusterOf := func(o any) string { c, _ := o.(*record.Record).Get("cluster"); return c.(string) }
	all, _ := v.Get("all")
	var got []string
	for _, o := range all.([]any) {
		got = append(got, clusterOf(o))
	}
	if !slices.Equal(got, []string{"east", "west", "east"}) {
		t.Errorf("all: clusters %v, want east west east (a/x twice, then b/y)", got)
	}
	byName, _ := v.Get("by_name")
	if n := byName.(*record.Record).Len(); n != 2 {
		t.Errorf("by_name has %d keys, want 2", n)
	}
	if x, _ := byName.(*record.Record).Get("a/x"); clusterOf(x) != "east" {
		t.Errorf("by_name[a/x] is %s's, want east's (first by name)", clusterOf(x))
	}
	bc, ok := v.Get("by_cluster")
	if !ok {
		t.Fatal("no by_cluster")
	}
	west, _ := bc.(*record.Record).Get("west")
	wn, _ := west.(*record.Record).Get("by_name")
	if x, ok := wn.(*record.Record).Get("a/x"); !ok || clusterOf(x) != "west" {
		t.Errorf("by_cluster.west.by_name[a/x] = %v", x)
	}
	if _, ok := west.(*record.Record).Get("by_cluster"); ok {
		t.Error("by_cluster's values have a by_cluster")
	}
	if _, ok := wn.(*record.Record).Get("b/y"); ok {
		t.Error("by_cluster.west has east's b/y")
	}
}

// A service that names a Kubernetes Service takes its endpoints from every cluster's
// EndpointSlices, keyed and named by cluster, restricted by its clusters list.
func TestEndpointsOfSeveralClusters(t *testing.T) {
	slice := func(ip string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-0"}}},
		}
	}
	objs := &Objects{
		ConfigMaps: []*corev1.ConfigMap{configMap(ns, DefaultServicesConfigMap, map[string]string{
			"all":  `{"namespace":"shop","service":"web"}`,
			"east": `{"namespace":"shop","service":"web","clusters":["east"]}`,
		})},
		ClusterEndpointSlices: map[string][]*discoveryv1.EndpointSlice{"east": {slice("10.1.0.1")}, "west": {slice("10.2.0.1")}},
	}
	snap, err := Build(objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(svc string) []string {
		for _, s := range snap.Services {
			if s.Field("name") == svc {
				var out []string
				for k, v := range s.Field("pods").(*record.Record).All() {
					c, _ := v.(*record.Record).Get("cluster")
					out = append(out, k+"="+c.(string))
				}
				return out
			}
		}
		t.Fatalf("no service %s", svc)
		return nil
	}
	if got := keys("all"); !slices.Equal(got, []string{"east:web-0=east", "west:web-0=west"}) {
		t.Errorf("all: %v", got)
	}
	if got := keys("east"); !slices.Equal(got, []string{"east:web-0=east"}) {
		t.Errorf("east: %v", got)
	}
	ids := objs.ClusterObjects()
	if len(ids) != 2 || ids[0].ID() != "endpointslice/shop/web-abc@east" {
		t.Errorf("cluster objects %v", ids)
	}
	if got := len(objs.WithoutObjects(map[string]bool{"endpointslice/shop/web-abc@west": true}).ClusterEndpointSlices["west"]); got != 0 {
		t.Errorf("west's slice not left out: %d", got)
	}
}

// With several clusters the HAProxy replicas are the home cluster's pods: another cluster's
// pods of the same namespace and labels are not peers.
func TestPeersOfTheHomeCluster(t *testing.T) {
	var conv PodConverter
	home := readyPod(ns, "haproxy-a", "10.1.0.1", map[string]string{"app": "haproxy"})
	other := readyPod(ns, "haproxy-b", "10.2.0.1", map[string]string{"app": "haproxy"})
	objs := &Objects{ConvertedPods: []*Pod{conv.ConvertIn(home, "east"), conv.ConvertIn(other, "west")}}
	sel, err := labels.Parse("app=haproxy")
	if err != nil {
		t.Fatal(err)
	}
	p := BuildPeers(objs, PeersOptions{Enabled: true, Namespace: ns, Selector: sel, Local: "haproxy-a", Cluster: "east"})
	if len(p.All) != 1 || p.All[0].Name != "haproxy-a" {
		t.Errorf("peers %+v, want haproxy-a (east's) alone", p.All)
	}
}

// A change proposed to the home cluster (the admission webhook, diff -f) replaces and
// deletes the home cluster's objects, never another cluster's of the same name.
func TestOverlayInHome(t *testing.T) {
	var pods PodConverter
	var conv ObjectConverter
	ing := func(cluster, host string) *Object {
		o, err := conv.FromUnstructured(map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": map[string]any{"namespace": "shop", "name": "web"}, "spec": map[string]any{"host": host}})
		if err != nil {
			t.Fatal(err)
		}
		return conv.InCluster(o, cluster)
	}
	east := readyPod("shop", "web-0", "10.1.0.1", map[string]string{"app": "web"})
	west := readyPod("shop", "web-0", "10.2.0.1", map[string]string{"app": "web"})
	objs := &Objects{Home: "east",
		ConvertedPods: []*Pod{pods.ConvertIn(east, "east"), pods.ConvertIn(west, "west")},
		Resources:     map[string][]*Object{"ingresses": {ing("east", "a"), ing("west", "b")}},
	}
	moved := readyPod("shop", "web-0", "10.1.0.9", map[string]string{"app": "web"})
	plain, err := conv.FromUnstructured(map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"namespace": "shop", "name": "web"}, "spec": map[string]any{"host": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	over := &Objects{Pods: []*corev1.Pod{moved}, Resources: map[string][]*Object{"ingresses": {plain}}}
	got := objs.Overlay(objs.InHome(over))
	var ps []string
	for _, p := range got.ConvertedPods {
		st, _ := p.Object().Get("status")
		ip, _ := st.(*record.Record).Get("podIP")
		ps = append(ps, p.Cluster()+"="+ip.(string))
	}
	slices.Sort(ps)
	if !slices.Equal(ps, []string{"east=10.1.0.9", "west=10.2.0.1"}) {
		t.Errorf("pods after the change %v: want east's replaced, west's kept", ps)
	}
	var hosts []string
	for _, o := range got.Resources["ingresses"] {
		spec, _ := o.Record().Get("spec")
		h, _ := spec.(*record.Record).Get("host")
		hosts = append(hosts, o.Cluster()+"="+h.(string))
	}
	slices.Sort(hosts)
	if !slices.Equal(hosts, []string{"east=c", "west=b"}) {
		t.Errorf("ingresses after the change %v: want east's replaced, west's kept", hosts)
	}
	del, ok := got.Delete("Ingress", "shop", "web")
	if !ok || len(del.Resources["ingresses"]) != 1 || del.Resources["ingresses"][0].Cluster() != "west" {
		t.Errorf("delete of the Ingress: %v, left %v; want west's left", ok, del.Resources["ingresses"])
	}
	del, ok = got.Delete("Pod", "shop", "web-0")
	if !ok || len(del.ConvertedPods) != 1 || del.ConvertedPods[0].Cluster() != "west" {
		t.Errorf("delete of the pod: %v, left %d; want west's left", ok, len(del.ConvertedPods))
	}
	if one := (&Objects{}).InHome(over); one != over {
		t.Error("InHome with one cluster changed the objects")
	}
}
