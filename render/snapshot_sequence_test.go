package render

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// sourceWorld is what a source sees (the services ConfigMap, pods, EndpointSlices, the config
// ConfigMap), changed at random one object at a time as an informer changes its cache: a
// changed object is a new object with a new resourceVersion.
type sourceWorld struct {
	rng       *rand.Rand
	services  map[string]map[string]any // entries by name, written as JSON
	pods      map[string]*corev1.Pod
	slices    map[string]*discoveryv1.EndpointSlice // by Service
	templates map[string]string                     // nil: the built-in ones
	rv, next  int
	// With convert, the pods are given converted (Objects.ConvertedPods), each converted
	// again only when it changed, as the file source does.
	convert   bool
	conv      snapshot.PodConverter
	converted map[*corev1.Pod]*snapshot.Pod
}

func (w *sourceWorld) nextRV() string { w.rv++; return strconv.Itoa(w.rv) }

func (w *sourceWorld) addPod(app string) {
	w.next++
	name := fmt.Sprintf("%s-%d", app, w.next)
	w.pods[name] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: name, UID: types.UID("uid-" + name),
			ResourceVersion: w.nextRV(), Labels: map[string]string{"app": app}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: w.ip(),
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}}},
	}
}

func (w *sourceWorld) ip() string {
	w.next++
	return fmt.Sprintf("10.%d.%d.%d", w.next/62500%250, w.next/250%250, w.next%250)
}

func (w *sourceWorld) changePod(name string, change func(*corev1.Pod)) {
	p := w.pods[name].DeepCopy()
	change(p)
	p.ResourceVersion = w.nextRV()
	w.pods[name] = p
}

func (w *sourceWorld) setSlice(service string) {
	var eps []discoveryv1.Endpoint
	for range 1 + w.rng.IntN(3) {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{w.ip()}})
	}
	w.slices[service] = &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: service + "-1", ResourceVersion: w.nextRV(),
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
	}
}

func (w *sourceWorld) addService() {
	w.next++
	name := fmt.Sprintf("svc%d", w.next)
	svc := map[string]any{"namespace": "web", "ports": []any{8080}, "ssl": w.rng.IntN(2) == 0,
		"hostnames": []any{name + ".example.com"}}
	if w.rng.IntN(5) == 0 {
		svc["service"] = name // the endpoints of a Kubernetes Service
		w.setSlice(name)
	} else {
		svc["selector"] = map[string]any{"app": name}
		for range w.rng.IntN(4) {
			w.addPod(name)
		}
	}
	w.services[name] = svc
}

// objects are the world as a source's Objects.
func (w *sourceWorld) objects() *snapshot.Objects {
	data := map[string]string{}
	for name, svc := range w.services {
		b, err := json.Marshal(svc)
		if err != nil {
			panic(err)
		}
		data[name] = string(b)
	}
	objs := &snapshot.Objects{ConfigMaps: []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"}, Data: data}}}
	if w.templates != nil {
		objs.ConfigMaps = append(objs.ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "config"}, Data: w.templates})
	}
	for _, name := range slices.Sorted(maps.Keys(w.slices)) {
		objs.EndpointSlices = append(objs.EndpointSlices, w.slices[name])
	}
	next := map[*corev1.Pod]*snapshot.Pod{}
	for _, name := range slices.Sorted(maps.Keys(w.pods)) {
		p := w.pods[name]
		if !w.convert {
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

// step makes one change at random; it says which kind.
func (w *sourceWorld) step() string {
	podNames := slices.Sorted(maps.Keys(w.pods))
	svcNames := slices.Sorted(maps.Keys(w.services))
	anyPod := func() string { return podNames[w.rng.IntN(len(podNames))] }
	switch k := w.rng.IntN(20); {
	case k < 3:
		w.addPod(svcNames[w.rng.IntN(len(svcNames))])
		return "pod added"
	case k < 5 && len(podNames) > 0:
		delete(w.pods, anyPod())
		return "pod deleted"
	case k < 8 && len(podNames) > 0:
		w.changePod(anyPod(), func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = !p.Status.ContainerStatuses[0].Ready })
		return "pod readiness flipped"
	case k < 10 && len(podNames) > 0:
		ip := w.ip()
		w.changePod(anyPod(), func(p *corev1.Pod) { p.Status.PodIP = ip })
		return "pod address changed"
	case k < 11 && len(podNames) > 0:
		app := svcNames[w.rng.IntN(len(svcNames))]
		w.changePod(anyPod(), func(p *corev1.Pod) { p.Labels = map[string]string{"app": app} })
		return "pod relabelled"
	case k < 12 && len(w.slices) > 0:
		w.setSlice(slices.Sorted(maps.Keys(w.slices))[w.rng.IntN(len(w.slices))])
		return "EndpointSlice changed"
	case k < 13:
		w.addService()
		return "service added"
	case k < 14 && len(svcNames) > 2:
		delete(w.services, svcNames[w.rng.IntN(len(svcNames))])
		return "service removed"
	case k < 18:
		name := svcNames[w.rng.IntN(len(svcNames))]
		svc := maps.Clone(w.services[name])
		switch w.rng.IntN(5) {
		case 0:
			svc["ssl"] = svc["ssl"] != true
		case 1:
			if _, ok := svc["path"]; ok {
				delete(svc, "path")
			} else {
				svc["path"] = "^/v2/"
			}
		case 2:
			svc["hostnames"] = []any{fmt.Sprintf("^alt%d\\.example\\.com$", w.rng.IntN(1000))}
		case 3:
			svc["check_path"] = "/healthz"
		case 4:
			if _, ok := svc["selector"]; ok {
				svc["selector"] = map[string]any{"app": svcNames[w.rng.IntN(len(svcNames))]}
			}
		}
		w.services[name] = svc
		return "service edited"
	case k < 19:
		w.templates = maps.Clone(templates.Default)
		if w.rng.IntN(2) == 0 {
			w.templates["rules.j2"] = strings.Replace(w.templates["rules.j2"], "use_backend be_", "use_backend be-", -1)
		} else {
			w.templates = nil
		}
		return "template edited"
	}
	return "nothing changed"
}

// The default template renders every step of a random sequence of changes to what a source
// sees, through the real snapshot path (snapshot.Build with a PodCache), with one renderer as
// a fresh renderer renders it; at each step a service is the last snapshot's very map exactly
// when it did not change, and after a pod's change the rules and backends of those kept are
// reused.
func TestDefaultTemplateRandomChangesThroughSnapshotBuild(t *testing.T) {
	for _, convert := range []bool{false, true} {
		t.Run(fmt.Sprintf("converted pods %v", convert), func(t *testing.T) {
			w := &sourceWorld{rng: rand.New(rand.NewPCG(11, 25)), services: map[string]map[string]any{},
				pods: map[string]*corev1.Pod{}, slices: map[string]*discoveryv1.EndpointSlice{}, convert: convert}
			for range 30 {
				w.addService()
			}
			opts := snapshot.Options{PodCache: &snapshot.PodCache{}, TemplateKey: templates.DefaultKey,
				StatsPassword: "secret", StatsPasswordSet: true}
			kept := New(Options{SSLDir: "/etc/haproxy/ssl"})
			steps := 300
			if testing.Short() {
				steps = 80
			}
			counts := map[string]int{}
			var last *snapshot.Snapshot
			prev := ""
			for i := range steps {
				what := "start"
				if i > 0 {
					what = w.step()
				}
				counts[what]++
				objs := w.objects()
				snap, err := snapshot.Build(objs, opts)
				if err != nil {
					t.Fatalf("step %d (%s): %v", i, what, err)
				}
				uncached := opts
				uncached.PodCache = nil
				ref, err := snapshot.Build(objs, uncached) // every service a new map
				if err != nil {
					t.Fatal(err)
				}
				before := kept.kept.BodiesReused()
				got, gotErr := kept.Render(context.Background(), snap)
				reused := kept.kept.BodiesReused() - before
				want, wantErr := renderFresh(Options{SSLDir: "/etc/haproxy/ssl"}, ref)
				if gotErr != nil || wantErr != nil {
					t.Fatalf("step %d (%s): the kept renderer: %v; a fresh one: %v", i, what, gotErr, wantErr)
				}
				if d := bundleDiff(got, want); d != "" {
					t.Fatalf("step %d (%s): the kept renderer renders otherwise than a fresh one: %s", i, what, d)
				}
				if last != nil {
					same, wrong := keptServiceMaps(last, snap, ref)
					if wrong != "" {
						t.Errorf("step %d (%s): %s", i, what, wrong)
					}
					if strings.HasPrefix(what, "pod") && prev != "template edited" && reused < 2*same {
						t.Errorf("step %d (%s): %d iterations reused, want at least %d (%d services kept)", i, what, reused, 2*same, same)
					}
				}
				last, prev = snap, what
			}
			for _, what := range []string{"pod added", "pod deleted", "pod readiness flipped", "pod address changed", "pod relabelled",
				"EndpointSlice changed", "service added", "service removed", "service edited", "template edited"} {
				if counts[what] == 0 {
					t.Errorf("the sequence missed a kind of change (%s): %v", what, counts)
				}
			}
			t.Logf("%d steps %v", steps, counts)
		})
	}
}

// keptServiceMaps counts the services of next that are the same map as in prev; wrong says
// which service is a new map though it did not change, or the same map though it did, or
// differs from the one of ref (the same inputs built without a cache).
func keptServiceMaps(prev, next, ref *snapshot.Snapshot) (same int, wrong string) {
	if asJSON(next.Services) != asJSON(ref.Services) {
		return 0, "the services differ from a build's without a cache"
	}
	old := map[string]*record.Record{}
	for _, s := range prev.Services {
		old[s.Field("name").(string)] = s
	}
	for _, s := range next.Services {
		name := s.Field("name").(string)
		o := old[name]
		if o == nil {
			continue
		}
		kept := o == s
		changed := asJSON(o) != asJSON(s) // s is as ref has it
		switch {
		case kept && !changed:
			same++
		case kept:
			wrong = name + " changed but is the same map"
		case !changed:
			wrong = name + " did not change but is a new map"
		}
	}
	return same, wrong
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
