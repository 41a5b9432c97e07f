package snapshot

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// randWorld is a source's objects changed at random, a changed object always a new one.
type randWorld struct {
	r        *rand.Rand
	services map[string]string
	pods     []*corev1.Pod // in the source's order, which changes too
	slices   []*discoveryv1.EndpointSlice
	rv, uid  int
	conv     PodConverter
	convs    map[*corev1.Pod]*Pod
}

var (
	randNamespaces = []string{"a", "b", "c"}
	randApps       = []string{"x", "y", "z", "w"}
	randTiers      = []string{"t1", "t2"}
	randSelectors  = []string{`{"app":"x"}`, `{"app":"y","tier":"t1"}`, `"app in (x,z)"`, `"tier=t2,app notin (y)"`,
		`"tier"`, `"!tier"`, `{}`, `{"app":"none"}`, `"app in (w)"`}
)

func (w *randWorld) nextRV() string { w.rv++; return strconv.Itoa(w.rv) }

func (w *randWorld) newPod() *corev1.Pod {
	w.uid++
	l := map[string]string{"app": randApps[w.r.IntN(len(randApps))]}
	if w.r.IntN(3) > 0 {
		l["tier"] = randTiers[w.r.IntN(len(randTiers))]
	}
	p := readyPod(randNamespaces[w.r.IntN(len(randNamespaces))], "p"+strconv.Itoa(w.uid%1000000), fmt.Sprintf("10.9.%d.%d", w.uid/250, w.uid%250), l)
	p.UID = types.UID("u" + strconv.Itoa(w.uid))
	p.ResourceVersion = w.nextRV()
	return p
}

func (w *randWorld) service() string {
	ns := randNamespaces[w.r.IntN(len(randNamespaces))]
	if w.r.IntN(6) == 0 {
		return fmt.Sprintf(`{"namespace":%q,"service":"k%d"}`, ns, w.r.IntN(3))
	}
	return fmt.Sprintf(`{"namespace":%q,"selector":%s,"port":%d}`, ns, randSelectors[w.r.IntN(len(randSelectors))], w.r.IntN(3))
}

const badEntry = `{"namespace":`

// change makes one random change, as a source sees them; a bad entry is soon mended.
func (w *randWorld) change() {
	for _, k := range slices.Sorted(maps.Keys(w.services)) {
		if w.services[k] == badEntry && w.r.IntN(2) == 0 {
			w.services[k] = w.service()
		}
	}
	i := w.r.IntN(len(w.pods))
	switch w.r.IntN(13) {
	case 0, 1: // a pod added
		w.pods = slices.Insert(w.pods, w.r.IntN(len(w.pods)+1), w.newPod())
	case 2: // a pod deleted
		w.pods = slices.Delete(w.pods, i, i+1)
	case 3, 4: // relabelled
		p := w.pods[i].DeepCopy()
		p.Labels["app"] = randApps[w.r.IntN(len(randApps))]
		if w.r.IntN(2) == 0 {
			delete(p.Labels, "tier")
		}
		p.ResourceVersion = w.nextRV()
		w.pods[i] = p
	case 5: // readiness flipped, or the address changed
		p := w.pods[i].DeepCopy()
		if w.r.IntN(2) == 0 {
			p.Status.ContainerStatuses[0].Ready = !p.Status.ContainerStatuses[0].Ready
		} else {
			p.Status.PodIP = fmt.Sprintf("10.8.0.%d", w.r.IntN(250))
		}
		p.ResourceVersion = w.nextRV()
		w.pods[i] = p
	case 6: // the same pod as a new object (a relist)
		w.pods[i] = w.pods[i].DeepCopy()
	case 7: // the pods in another order
		w.r.Shuffle(len(w.pods), func(a, b int) { w.pods[a], w.pods[b] = w.pods[b], w.pods[a] })
	case 8: // a service added, edited or its selector changed; now and then a bad entry
		w.services["s"+strconv.Itoa(w.r.IntN(12))] = w.service()
		if w.r.IntN(8) == 0 {
			w.services["s"+strconv.Itoa(w.r.IntN(12))] = badEntry
		}
	case 9: // a service removed
		delete(w.services, "s"+strconv.Itoa(w.r.IntN(12)))
	case 10: // an EndpointSlice changed
		k := w.r.IntN(len(w.slices))
		s := w.slices[k].DeepCopy()
		s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.7.0.%d", w.r.IntN(250))}}}
		s.ResourceVersion = w.nextRV()
		w.slices[k] = s
	case 12: // the last pod deleted: no new pod where it was
		w.pods = w.pods[:len(w.pods)-1]
	case 11: // a pod moved to another namespace (deleted, made again)
		p := w.newPod()
		p.Name = w.pods[i].Name
		w.pods[i] = p
	}
	if len(w.pods) == 0 {
		w.pods = append(w.pods, w.newPod())
	}
}

func (w *randWorld) objects(convert bool) *Objects {
	objs := &Objects{ConfigMaps: []*corev1.ConfigMap{configMap(ns, "services", maps.Clone(w.services))},
		EndpointSlices: slices.Clone(w.slices)}
	if !convert {
		objs.Pods = slices.Clone(w.pods)
		return objs
	}
	next := map[*corev1.Pod]*Pod{}
	for _, p := range w.pods {
		cp, ok := w.convs[p]
		if !ok {
			cp = w.conv.Convert(p)
		}
		next[p] = cp
		objs.ConvertedPods = append(objs.ConvertedPods, cp)
	}
	w.convs = next
	return objs
}

// newRandWorld's objects have UIDs and resourceVersions from seed*1,000,000 on: two worlds'
// pods may share names, not versions (as two clusters' pods).
func newRandWorld(seed uint64, pods int) *randWorld {
	w := &randWorld{r: rand.New(rand.NewPCG(seed, 7)), services: map[string]string{}, uid: int(seed) * 1000000, rv: int(seed) * 1000000}
	for range pods {
		w.pods = append(w.pods, w.newPod())
	}
	for i := range 8 {
		w.services["s"+strconv.Itoa(i)] = w.service()
	}
	for _, ns := range randNamespaces {
		for k := range 3 {
			w.slices = append(w.slices, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("k%d-x", k), ResourceVersion: w.nextRV(),
					Labels: map[string]string{discoveryv1.LabelServiceName: "k" + strconv.Itoa(k)}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.7.0.1"}}},
			})
		}
	}
	return w
}

// TestBuildThroughCacheRandomChanges: at each step of a long random sequence of pod, label,
// namespace, selector, service and EndpointSlice changes, a Build through the PodCache (whose
// pod index is updated from the last Build's) gives what a Build without a cache gives; Builds
// of another world's objects through the same cache (a candidate's tests, a trial) come in
// between. Namespaces hold more pods than indexThreshold, so that the label index is used.
func TestBuildThroughCacheRandomChanges(t *testing.T) {
	for _, convert := range []bool{false, true} {
		t.Run(fmt.Sprintf("converted=%v", convert), func(t *testing.T) {
			w := newRandWorld(1, 210) // 70 a namespace: more than indexThreshold
			other := newRandWorld(2, 40)
			cache := &PodCache{}
			compared := 0
			for step := range 300 {
				for range 1 + w.r.IntN(3) {
					w.change()
				}
				if step%17 == 0 {
					other.change()
					_, _ = Build(other.objects(convert), Options{PodCache: cache}) // compared below, through w
				}
				objs := w.objects(convert)
				got, gotErr := Build(objs, Options{PodCache: cache})
				want, err := Build(objs, Options{})
				if fmt.Sprint(gotErr) != fmt.Sprint(err) {
					t.Fatalf("step %d: error %v, without a cache %v", step, gotErr, err)
				}
				if err != nil {
					continue
				}
				compared++
				if g, wa := plainServices(got), plainServices(want); g != wa {
					i := 0
					for i < len(g) && i < len(wa) && g[i] == wa[i] {
						i++
					}
					t.Logf("first difference: got ...%s...\nwant ...%s...", g[max(0, i-300):min(len(g), i+200)], wa[max(0, i-300):min(len(wa), i+200)])
					t.Fatalf("step %d: the services differ from a Build's without a cache:\n got %s\nwant %s", step, servicePods(got), servicePods(want))
				}
			}
			if compared < 150 {
				t.Errorf("only %d of 300 steps had no bad entry", compared)
			}
		})
	}
}

// servicePods is each service's name and pods, for a report.
func servicePods(s *Snapshot) string {
	var out string
	for _, svc := range s.Services {
		out += fmt.Sprintf("%s:%s", svc.Field("name"), svc.Field("namespace"))
		if pods, ok := svc.Field("pods").(*record.Record); ok {
			for i := range pods.Len() {
				out += "," + pods.Key(i)
			}
		}
		out += " "
	}
	return out
}
