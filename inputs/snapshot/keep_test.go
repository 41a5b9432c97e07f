package snapshot

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// keepWorld is what a source sees, changed one object at a time as a source's cache changes
// it: a changed object is a new object (a new resourceVersion), never changed in place.
type keepWorld struct {
	services map[string]string
	pods     map[string]*corev1.Pod
	slices   map[string]*discoveryv1.EndpointSlice
	rv       int
	// converted: the pods as a source that converts them (the file source, the kube source
	// with several clusters) gives them, each converted again only when it changed.
	conv      PodConverter
	converted map[*corev1.Pod]*Pod
}

func (w *keepWorld) nextRV() string { w.rv++; return strconv.Itoa(w.rv) }

func (w *keepWorld) pod(name, app, ip string) {
	p := readyPod("shop", name, ip, map[string]string{"app": app})
	p.ResourceVersion = w.nextRV()
	w.pods[name] = p
}

// changePod replaces a pod by a changed copy, as an informer does on an update.
func (w *keepWorld) changePod(name string, change func(*corev1.Pod)) {
	p := w.pods[name].DeepCopy()
	change(p)
	p.ResourceVersion = w.nextRV()
	w.pods[name] = p
}

func (w *keepWorld) slice(service, ip string) {
	w.slices[service] = &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: service + "-x", ResourceVersion: w.nextRV(),
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
	}
}

// objects are the world as a source's Objects: a new services ConfigMap each time (as a
// source decodes one), the pods typed or converted.
func (w *keepWorld) objects(convert bool) *Objects {
	objs := &Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", maps.Clone(w.services))}}
	for _, name := range slices.Sorted(maps.Keys(w.slices)) {
		objs.EndpointSlices = append(objs.EndpointSlices, w.slices[name])
	}
	next := map[*corev1.Pod]*Pod{}
	for _, name := range slices.Sorted(maps.Keys(w.pods)) {
		p := w.pods[name]
		if !convert {
			objs.Pods = append(objs.Pods, p)
			continue
		}
		cp, ok := w.converted[p]
		if !ok {
			cp = w.conv.Convert(p)
		}
		next[p] = cp
		objs.ConvertedPods = append(objs.ConvertedPods, cp)
	}
	w.converted = next
	return objs
}

// TestBuildKeepsUnchangedServices: through one cache, a Build gives the last Build's very map
// for every service whose entry and pods (or EndpointSlices) did not change, and a new map
// for exactly the others; what it gives equals a Build without a cache; and a Build never
// changes a map an earlier Snapshot holds.
func TestBuildKeepsUnchangedServices(t *testing.T) {
	sel := func(app string) string { return fmt.Sprintf(`{"namespace":"shop","selector":{"app":%q}}`, app) }
	steps := []struct {
		name   string
		change func(w *keepWorld)
		want   []string // the services that are new maps
	}{
		{"nothing changed", func(w *keepWorld) {}, nil},
		{"a pod made not ready", func(w *keepWorld) {
			w.changePod("a-1", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false })
		}, []string{"a"}},
		{"the pod ready again", func(w *keepWorld) {
			w.changePod("a-1", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = true })
		}, []string{"a"}},
		{"a pod relabelled from one service to another", func(w *keepWorld) {
			w.changePod("b-1", func(p *corev1.Pod) { p.Labels["app"] = "c" })
		}, []string{"b", "c"}},
		{"a pod's address changed", func(w *keepWorld) {
			w.changePod("c-1", func(p *corev1.Pod) { p.Status.PodIP = "10.1.1.1" })
		}, []string{"c"}},
		{"a pod of no service changed", func(w *keepWorld) {
			w.changePod("z-1", func(p *corev1.Pod) { p.Status.PodIP = "10.1.1.2" })
		}, nil},
		{"a pod's annotations changed (a new resourceVersion, its service's pods a new record)", func(w *keepWorld) {
			w.changePod("a-2", func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} })
		}, []string{"a"}},
		{"a service edited", func(w *keepWorld) {
			w.services["a"] = `{"namespace":"shop","selector":{"app":"a"},"hostnames":["a.example.com"]}`
		}, []string{"a"}},
		{"a selector changed", func(w *keepWorld) { w.services["b"] = sel("c") }, []string{"b"}},
		{"the EndpointSlice of a Kubernetes Service changed", func(w *keepWorld) { w.slice("k", "10.2.0.2") }, []string{"k"}},
		{"the EndpointSlice of another Service changed", func(w *keepWorld) { w.slice("other", "10.2.0.3") }, nil},
		{"a Kubernetes Service's entry edited", func(w *keepWorld) {
			w.services["k"] = `{"namespace":"shop","service":"k","ports":[80]}`
		}, []string{"k"}},
		{"a service added", func(w *keepWorld) { w.services["d"] = sel("a") }, []string{"d"}},
		{"a service removed", func(w *keepWorld) { delete(w.services, "c") }, nil},
		{"a pod added", func(w *keepWorld) { w.pod("a-3", "a", "10.0.0.33") }, []string{"a", "d"}},
		{"a pod deleted", func(w *keepWorld) { delete(w.pods, "a-2") }, []string{"a", "d"}},
		{"a service removed and added back", func(w *keepWorld) { w.services["c"] = sel("c") }, []string{"c"}},
	}
	for _, mode := range []string{"typed pods (kube source)", "converted pods (file source)"} {
		t.Run(mode, func(t *testing.T) {
			w := &keepWorld{services: map[string]string{"a": sel("a"), "b": sel("b"), "c": sel("c"),
				"k": `{"namespace":"shop","service":"k"}`}, pods: map[string]*corev1.Pod{}, slices: map[string]*discoveryv1.EndpointSlice{}}
			for i, name := range []string{"a-1", "a-2", "b-1", "b-2", "c-1", "z-1"} {
				w.pod(name, name[:1], fmt.Sprintf("10.0.0.%d", i+1))
			}
			w.slice("k", "10.2.0.1")
			w.slice("other", "10.3.0.1")
			cache := &PodCache{}
			convert := mode != "typed pods (kube source)"
			prev, err := Build(w.objects(convert), Options{PodCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range steps {
				step.change(w)
				before := plainServices(prev)
				objs := w.objects(convert)
				snap, err := Build(objs, Options{PodCache: cache})
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				if got := newMaps(prev, snap); !slices.Equal(got, step.want) {
					t.Errorf("%s: new maps for %v, want %v", step.name, got, step.want)
				}
				if plainServices(prev) != before {
					t.Fatalf("%s: the Build changed the services of the Snapshot before", step.name)
				}
				fresh, err := Build(objs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if plainServices(snap) != plainServices(fresh) {
					t.Fatalf("%s: the services differ from a Build's without a cache", step.name)
				}
				prev = snap
			}
		})
	}
}

// TestBuildKeepsPodsOfAnEditedService: a service whose entry changed but whose pods did not
// is a new map holding the same pods record.
func TestBuildKeepsPodsOfAnEditedService(t *testing.T) {
	w := &keepWorld{services: map[string]string{"a": `{"namespace":"shop","selector":{"app":"a"}}`},
		pods: map[string]*corev1.Pod{}, slices: map[string]*discoveryv1.EndpointSlice{}}
	w.pod("a-1", "a", "10.0.0.1")
	cache := &PodCache{}
	first, err := Build(w.objects(false), Options{PodCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	w.services["a"] = `{"namespace":"shop","selector":{"app":"a"},"ssl":true}`
	second, err := Build(w.objects(false), Options{PodCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if samePointer(first.Services[0], second.Services[0]) {
		t.Error("an edited service is the last Build's map")
	}
	if first.Services[0].Field("pods").(*record.Record) != second.Services[0].Field("pods").(*record.Record) {
		t.Error("the pods of an edited service whose pods did not change are a new record")
	}
	if second.Services[0].Field("ssl") != true {
		t.Errorf("the edit is not in the map: %v", second.Services[0])
	}
}

func samePointer(a, b *record.Record) bool { return a == b }

// newMaps names the services of next that are not the map of the same name in prev.
func newMaps(prev, next *Snapshot) []string {
	old := map[string]*record.Record{}
	for _, s := range prev.Services {
		old[s.Field("name").(string)] = s
	}
	var out []string
	for _, s := range next.Services {
		name := s.Field("name").(string)
		if o, ok := old[name]; !ok || !samePointer(o, s) {
			out = append(out, name)
		}
	}
	return out
}

// plainServices is the services as JSON: a deep copy, records included.
func plainServices(s *Snapshot) string {
	b, err := json.Marshal(s.Services)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestPodCacheSharedByConcurrentBuilds: Builds of different objects through one cache at the
// same time (the sidecar's sync, a candidate's test, a trial) each give what a Build without a
// cache gives, whatever the other left in the cache.
func TestPodCacheSharedByConcurrentBuilds(t *testing.T) {
	sel := func(app string) string { return fmt.Sprintf(`{"namespace":"shop","selector":{"app":%q}}`, app) }
	worlds := make([]*keepWorld, 2)
	for i := range worlds {
		w := &keepWorld{services: map[string]string{"a": sel("a"), "b": sel("b")}, pods: map[string]*corev1.Pod{},
			slices: map[string]*discoveryv1.EndpointSlice{}, rv: i * 1000}
		for j, name := range []string{"a-1", "a-2", "b-1"} {
			w.pod(name, name[:1], fmt.Sprintf("10.%d.0.%d", i, j))
		}
		worlds[i] = w
	}
	cache := &PodCache{}
	errs := make(chan error, len(worlds))
	for i, w := range worlds {
		go func() {
			for step := range 50 {
				name := []string{"a-1", "a-2", "b-1"}[step%3]
				w.changePod(name, func(p *corev1.Pod) { p.Status.PodIP = fmt.Sprintf("10.%d.1.%d", i, step) })
				if step%5 == 0 {
					w.services["b"] = sel([]string{"a", "b"}[step%2])
				}
				objs := w.objects(false)
				got, err := Build(objs, Options{PodCache: cache})
				if err != nil {
					errs <- err
					return
				}
				want, err := Build(objs, Options{})
				if err != nil {
					errs <- err
					return
				}
				if plainServices(got) != plainServices(want) {
					errs <- fmt.Errorf("world %d step %d: the services differ from a Build's without a cache", i, step)
					return
				}
			}
			errs <- nil
		}()
	}
	for range worlds {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
