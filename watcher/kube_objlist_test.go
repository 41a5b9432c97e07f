package watcher

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// fakeResource changes a watched resource's store as its informer would, recording each change
// in list as the handler does unless missed.
type fakeResource struct {
	store  cache.Store
	list   *objectList
	conv   snapshot.ObjectConverter
	nss    []string // "" alone: cluster-scoped
	n      int
	missed bool // the next change is not recorded
}

func (f *fakeResource) object(t testing.TB, ns, name string) *kubeObject {
	f.n++
	meta := map[string]any{"name": name, "resourceVersion": fmt.Sprint(f.n)}
	if ns != "" {
		meta["namespace"] = ns
	}
	o, err := f.conv.FromUnstructured(map[string]any{"apiVersion": "example.com/v1", "kind": "Route", "metadata": meta})
	if err != nil {
		t.Fatal(err)
	}
	return &kubeObject{o}
}

// apply makes one random change: an object added, replaced by its new version (its name
// recorded twice at times), or deleted (at times seen as a tombstone, as after a relist).
func (f *fakeResource) apply(t testing.TB, rng *rand.Rand) {
	keys := f.store.ListKeys()
	switch op := rng.IntN(3); {
	case op == 0 || len(keys) == 0:
		o := f.object(t, f.nss[rng.IntN(len(f.nss))], fmt.Sprintf("r-%d", rng.IntN(5000)))
		if err := f.store.Add(o); err != nil {
			t.Fatal(err)
		}
		f.recorded(o)
	case op == 1:
		old, _, _ := f.store.GetByKey(keys[rng.IntN(len(keys))])
		o := f.object(t, old.(*kubeObject).Namespace(), old.(*kubeObject).Name())
		if err := f.store.Update(o); err != nil {
			t.Fatal(err)
		}
		f.recorded(o)
		if rng.IntN(4) == 0 {
			f.recorded(o)
		}
	default:
		key := keys[rng.IntN(len(keys))]
		o, _, _ := f.store.GetByKey(key)
		if err := f.store.Delete(o); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 {
			f.recorded(o)
		} else {
			f.recorded(cache.DeletedFinalStateUnknown{Key: key, Obj: o})
		}
	}
}

func (f *fakeResource) recorded(o any) {
	if !f.missed {
		f.list.record(o)
	}
	f.missed = false
}

// relist replaces the store's objects as a relist does (cache.Store.Replace), the handler told
// of every object: updates, adds and deletes.
func (f *fakeResource) relist(t testing.TB, rng *rand.Rand) {
	old := f.store.List()
	var items []any
	for _, it := range old {
		if rng.IntN(5) > 0 { // kept, at a new version
			o := it.(*kubeObject)
			items = append(items, f.object(t, o.Namespace(), o.Name()))
		}
	}
	for range rng.IntN(20) {
		items = append(items, f.object(t, f.nss[rng.IntN(len(f.nss))], fmt.Sprintf("r-%d", rng.IntN(5000))))
	}
	if err := f.store.Replace(items, ""); err != nil {
		t.Fatal(err)
	}
	for _, it := range slices.Concat(old, items) {
		f.recorded(it)
	}
}

// burst adds maxChanged+1 objects, or deletes those it added the last time.
func (f *fakeResource) burst(t testing.TB) {
	var added []any
	for _, it := range f.store.List() {
		if strings.HasPrefix(it.(*kubeObject).Name(), "burst-") {
			added = append(added, it)
		}
	}
	for _, it := range added {
		if err := f.store.Delete(it); err != nil {
			t.Fatal(err)
		}
		f.recorded(it)
	}
	if len(added) > 0 {
		return
	}
	for i := range maxChanged + 1 {
		o := f.object(t, f.nss[i%len(f.nss)], fmt.Sprintf("burst-%d", i))
		if err := f.store.Add(o); err != nil {
			t.Fatal(err)
		}
		f.recorded(o)
	}
}

// sortedStore is what the store holds, sorted by namespace then name here, independently of
// objectList.
func sortedStore(store cache.Store) []*snapshot.Object {
	var out []*snapshot.Object
	for _, it := range store.List() {
		out = append(out, it.(*kubeObject).Object)
	}
	slices.SortFunc(out, func(a, b *snapshot.Object) int {
		return cmp.Or(cmp.Compare(a.Namespace(), b.Namespace()), cmp.Compare(a.Name(), b.Name()))
	})
	return out
}

// TestObjectListMatchesSort: after random sequences of adds, updates, deletes (as tombstones
// too) and relists, small and above maxChanged, in namespaces that are each other's prefixes or
// cluster-scoped, each read gives the objects the store holds (the same pointers) in the order
// of a sort, and the list a read returned is not changed by the next one.
func TestObjectListMatchesSort(t *testing.T) {
	for _, tc := range []struct {
		name string
		nss  []string
		seed uint64
	}{
		{"one namespace", []string{"web"}, 1},
		{"namespaces that are others' prefixes", []string{"a", "a-b", "ab", "b"}, 2},
		{"cluster-scoped", []string{""}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 25))
			f := &fakeResource{store: cache.NewStore(cache.MetaNamespaceKeyFunc), list: &objectList{}, nss: tc.nss}
			for range 200 {
				f.apply(t, rng)
			}
			var last, lastCopy []*snapshot.Object
			for step := range 1500 {
				switch r := rng.IntN(100); {
				case r == 0: // more changes than recorded: the next read lists the store
					f.burst(t)
				case r < 3:
					f.relist(t, rng)
				default:
					for range rng.IntN(4) { // none at times: a read with nothing changed
						f.apply(t, rng)
					}
				}
				if !slices.Equal(last, lastCopy) {
					t.Fatalf("step %d: the last read's list was changed", step)
				}
				got := f.list.read(f.store)
				last, lastCopy = got, slices.Clone(got)
				if want := sortedStore(f.store); !slices.Equal(got, want) {
					t.Fatalf("step %d: read %d objects, a sort of the store %d, or other objects or order", step, len(got), len(want))
				}
			}
		})
	}
}

// TestObjectListMissedEventDiffers: a change the handler did not record is not in the read (so
// the test above fails if an event is missed), and is once recorded.
func TestObjectListMissedEventDiffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	f := &fakeResource{store: cache.NewStore(cache.MetaNamespaceKeyFunc), list: &objectList{}, nss: []string{"a"}}
	for range 20 {
		f.apply(t, rng)
	}
	f.list.read(f.store)
	o := f.object(t, "a", "missed")
	if err := f.store.Add(o); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.list.read(f.store), o.Object) {
		t.Fatal("an object whose add was not recorded is in the read: the list is not updated from the recorded changes")
	}
	f.list.record(o)
	if got := f.list.read(f.store); !slices.Equal(got, sortedStore(f.store)) || !slices.Contains(got, o.Object) {
		t.Fatal("once recorded, the read is not what a sort gives")
	}
}

// BenchmarkKubeResourcesRead: a watched resource's objects a read gives at 10,000 objects in
// 20 namespaces: the store listed (what every read did, leaving the sort to Assemble), the
// store listed and sorted (objectsOf, a first read), and objectList after one object's change.
func BenchmarkKubeResourcesRead(b *testing.B) {
	f := &fakeResource{store: cache.NewStore(cache.MetaNamespaceKeyFunc), list: &objectList{}}
	for i := range 10_000 {
		if err := f.store.Add(f.object(b, fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("svc-%05d", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			items := f.store.List()
			list := make([]*snapshot.Object, 0, len(items))
			for _, it := range items {
				list = append(list, it.(*kubeObject).Object)
			}
		}
	})
	b.Run("list-sorted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			objectsOf(f.store)
		}
	})
	b.Run("one-change", func(b *testing.B) {
		f.list.read(f.store)
		versions := [2]*kubeObject{f.object(b, "ns-3", "svc-00503"), f.object(b, "ns-3", "svc-00503")}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			_ = f.store.Update(versions[i%2])
			f.list.record(versions[i%2])
			f.list.read(f.store)
		}
	})
}
