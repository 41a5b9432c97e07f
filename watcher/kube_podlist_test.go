package watcher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// storeInformer is an informer of which a podWatch uses the store only.
type storeInformer struct {
	cache.SharedIndexInformer
	store cache.Store
}

func (s storeInformer) GetStore() cache.Store { return s.store }

func newStoreWatch() *podWatch {
	return &podWatch{informer: storeInformer{store: cache.NewStore(cache.MetaNamespaceKeyFunc)},
		slices: storeInformer{store: cache.NewStore(cache.MetaNamespaceKeyFunc)}}
}

// fakeInformer changes the stores of a podWatch as its informers would, recording each change
// as their handlers do unless missed.
type fakeInformer struct {
	w      *podWatch
	ns     string
	n      int
	missed bool // the next change is not recorded
}

func (f *fakeInformer) apply(t testing.TB, rng *rand.Rand) {
	store := f.w.informer.GetStore()
	keys := store.ListKeys()
	switch op := rng.IntN(3); {
	case op == 0 || len(keys) == 0: // a new pod
		f.n++
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("p-%d", rng.IntN(100000)), ResourceVersion: fmt.Sprint(f.n)}}
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		f.recorded(p, true)
	case op == 1: // a pod replaced by its new version
		o, _, _ := store.GetByKey(keys[rng.IntN(len(keys))])
		p := o.(*corev1.Pod).DeepCopy()
		f.n++
		p.ResourceVersion = fmt.Sprint(f.n)
		if err := store.Update(p); err != nil {
			t.Fatal(err)
		}
		f.recorded(p, true)
	default:
		key := keys[rng.IntN(len(keys))]
		o, _, _ := store.GetByKey(key)
		if err := store.Delete(o); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 {
			f.recorded(o, true)
		} else { // as after a relist that did not see the delete
			f.recorded(cache.DeletedFinalStateUnknown{Key: key, Obj: o}, true)
		}
	}
	if rng.IntN(4) == 0 { // an EndpointSlice
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("s-%d", rng.IntN(20))}}
		if err := f.w.slices.GetStore().Add(s); err != nil {
			t.Fatal(err)
		}
		f.recorded(s, false)
	}
}

func (f *fakeInformer) recorded(o any, pods bool) {
	if !f.missed {
		f.w.record(o, pods)
	}
	f.missed = false
}

// TestPodListMatchesSort: after random pod and EndpointSlice adds, replacements and deletes in
// several namespaces, namespaces added and dropped, and bursts above maxChanged, each read's
// lists are those podsOf gives (the same objects in the same order), and the list a read
// returned is not changed by the next one.
func TestPodListMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fakes := map[string]*fakeInformer{}
	for _, ns := range []string{"a", "a-b", "b"} {
		fakes[ns] = &fakeInformer{w: newStoreWatch(), ns: ns}
		for range 50 {
			fakes[ns].apply(t, rng)
		}
	}
	watched := []string{"a", "a-b"}
	var l podList
	var lastPods []*corev1.Pod
	var lastCopy []*corev1.Pod
	for step := range 2000 {
		switch r := rng.IntN(100); {
		case r == 0 && len(watched) == 2:
			watched = append(watched, "b")
		case r == 1 && len(watched) == 3:
			watched = watched[:2]
		case r == 2: // more changes than recorded
			for range maxChanged + 1 {
				fakes[watched[0]].apply(t, rng)
			}
		default:
			for range 1 + rng.IntN(3) {
				fakes[watched[rng.IntN(len(watched))]].apply(t, rng)
			}
		}
		var infs []*podWatch
		for _, i := range rng.Perm(len(watched)) {
			infs = append(infs, fakes[watched[i]].w)
		}
		if !slices.Equal(lastPods, lastCopy) {
			t.Fatalf("step %d: the last read's list was changed", step)
		}
		pods, eps := l.read(infs)
		lastPods, lastCopy = pods, slices.Clone(pods)
		// podsOf takes nothing the handlers recorded: it is what a full sort gives.
		wantPods, wantSlices := podsOf(infs)
		if !slices.Equal(pods, wantPods) || !slices.Equal(eps, wantSlices) {
			t.Fatalf("step %d: read %d pods and %d slices, a sort %d and %d, or other objects", step, len(pods), len(eps), len(wantPods), len(wantSlices))
		}
	}
}

// TestPodListMissedEventDiffers: a change the handlers did not record is not in the read (so
// the test above fails if an event is missed), and is once recorded.
func TestPodListMissedEventDiffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := &fakeInformer{w: newStoreWatch(), ns: "a"}
	for range 20 {
		f.apply(t, rng)
	}
	var l podList
	infs := []*podWatch{f.w}
	l.read(infs)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "missed"}}
	if err := f.w.informer.GetStore().Add(p); err != nil {
		t.Fatal(err)
	}
	if pods, _ := l.read(infs); slices.Contains(pods, p) {
		t.Fatal("a pod whose add was not recorded is in the read: the lists are not updated from the recorded changes")
	}
	f.w.record(p, true)
	want, _ := podsOf(infs)
	if pods, _ := l.read(infs); !slices.Equal(pods, want) || !slices.Contains(pods, p) {
		t.Fatal("once recorded, the read is not what a sort gives")
	}
}

// BenchmarkKubePodsRead: the pods a read gives at 100,000 pods in 10 namespaces, by a full
// sort (podsOf, what every read did) and by podList after one pod's change.
func BenchmarkKubePodsRead(b *testing.B) {
	var infs []*podWatch
	for ns := range 10 {
		w := newStoreWatch()
		for i := range 10000 {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", ns), Name: fmt.Sprintf("svc-%d-%d", i/10, i%10), ResourceVersion: "1"}}
			if err := w.informer.GetStore().Add(p); err != nil {
				b.Fatal(err)
			}
		}
		infs = append(infs, w)
	}
	b.Run("sort", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			podsOf(infs)
		}
	})
	b.Run("one-change", func(b *testing.B) {
		var l podList
		l.read(infs)
		store := infs[3].informer.GetStore()
		o, _, _ := store.GetByKey("ns-3/svc-500-5")
		p := o.(*corev1.Pod)
		b.ReportAllocs()
		for b.Loop() {
			p = p.DeepCopy() // outside the read, but measured: a few allocations
			_ = store.Update(p)
			infs[3].record(p, true)
			l.read(infs)
		}
	})
}
