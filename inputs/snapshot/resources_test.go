package snapshot

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// sortedAsBefore is a list as Assemble made it before the sorted fast path, whatever its
// order: without nils, sorted, one object per name and cluster.
func sortedAsBefore(list []*Object) []*Object {
	objs := slices.DeleteFunc(slices.Clone(list), func(o *Object) bool { return o == nil })
	slices.SortStableFunc(objs, compareObjects)
	return slices.CompactFunc(objs, func(a, b *Object) bool { return a.key == b.key && a.cluster == b.cluster })
}

// byKeyAsBefore is objs in the order by_name was made in before keyOrder: a stable sort by key.
func byKeyAsBefore(objs []*Object) []*Object {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *Object) int { return strings.Compare(a.key, b.key) })
	return out
}

// TestAssembleSortedFastPath: Assemble's resources are the same (deep-equal) whether the
// source gives its lists sorted (the fast path: checked, not sorted) or in any order, with
// nils, objects twice, several clusters, cluster-scoped objects (among namespaced ones whose
// keys they interleave with: "r1" < "r1/x" < "r10") and namespaces that are
// others' prefixes ("a" and "a-b": by_name's key order is not the list's) — and the same as
// when every list was sorted. A sorted list is used as it is.
func TestAssembleSortedFastPath(t *testing.T) {
	var specs watchspec.List
	if err := specs.Set("routes.v1.example.com;index=svc=label:svc"); err != nil {
		t.Fatal(err)
	}
	var conv ObjectConverter
	obj := func(ns, name, cluster, svc string) *Object {
		meta := map[string]any{"name": name, "labels": map[string]any{"svc": svc}}
		if ns != "" {
			meta["namespace"] = ns
		}
		o, err := conv.FromUnstructured(map[string]any{"apiVersion": "example.com/v1", "kind": "Route", "metadata": meta})
		if err != nil {
			t.Fatal(err)
		}
		return conv.InCluster(o, cluster)
	}
	namespaces := [][]string{{"a"}, {"a", "a-b", "a-b-c", "ab", "b"}, {""}, {"", "a"}, {"", "r1"}}
	rnd := rand.New(rand.NewPCG(25, 1))
	for round := range 400 {
		nss := namespaces[round%len(namespaces)]
		clusters := []string{""}
		if round%3 == 1 {
			clusters = []string{"east", "west"}
		}
		var list []*Object
		for range rnd.IntN(40) {
			list = append(list, obj(nss[rnd.IntN(len(nss))], fmt.Sprintf("r%d", rnd.IntN(15)), clusters[rnd.IntN(len(clusters))], fmt.Sprintf("s%d", rnd.IntN(4))))
		}
		if round%5 == 0 && len(list) > 0 {
			list[rnd.IntN(len(list))] = nil
		}
		want := sortedAsBefore(list)
		got := assembleResources(specs, map[string][]*Object{"routes": list}, nil)
		sorted := assembleResources(specs, map[string][]*Object{"routes": want}, nil)
		if !slices.Equal(got[0].Objects, want) {
			t.Fatalf("round %d: objects %v, want %v", round, got[0].Objects, want)
		}
		if !reflect.DeepEqual(got, sorted) {
			t.Fatalf("round %d: given in any order %v\ngiven sorted %v", round, got[0].Value, sorted[0].Value)
		}
		if len(want) > 0 && &sorted[0].Objects[0] != &want[0] {
			t.Fatalf("round %d: a sorted list was copied", round)
		}
		// by_name's order, of the whole list and of each cluster's (by_cluster), as before.
		lists := [][]*Object{want}
		for _, c := range clusters {
			lists = append(lists, slices.DeleteFunc(slices.Clone(want), func(o *Object) bool { return o.cluster != c }))
		}
		for _, l := range lists {
			if got, want := keyOrder(l), byKeyAsBefore(l); !slices.Equal(got, want) {
				t.Fatalf("round %d: key order %v, want %v", round, keys(got), keys(want))
			}
		}
	}
}

func keys(objs []*Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.cluster + ":" + o.key
	}
	return out
}

// TestAssembleResourcesThroughCache: along a random sequence of syncs, each changing a few
// objects of one of two resources (new versions, adds, deletes; several clusters at times;
// given sorted, or not at times, with a nil or an object twice), Assemble through a PodCache
// gives what Assemble without one gives (deep-equal), and a
// resource whose objects did not change is the last sync's, its lookups not made again.
func TestAssembleResourcesThroughCache(t *testing.T) {
	var specs watchspec.List
	for _, s := range []string{"routes.v1.example.com;index=svc=label:svc;index=host=field:spec.hosts", "backends.v1.example.com"} {
		if err := specs.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	var conv ObjectConverter
	n := 0
	obj := func(ns, name, cluster string, rng *rand.Rand) *Object {
		n++
		meta := map[string]any{"name": name, "resourceVersion": fmt.Sprint(n), "labels": map[string]any{"svc": fmt.Sprintf("s%d", rng.IntN(6))}}
		if ns != "" {
			meta["namespace"] = ns
		}
		o, err := conv.FromUnstructured(map[string]any{"apiVersion": "example.com/v1", "kind": "Route", "metadata": meta,
			"spec": map[string]any{"hosts": []any{fmt.Sprintf("h%d", rng.IntN(5)), fmt.Sprintf("h%d", rng.IntN(5))}}})
		if err != nil {
			t.Fatal(err)
		}
		return conv.InCluster(o, cluster)
	}
	for _, tc := range []struct {
		name     string
		clusters []string
	}{{"one cluster", []string{""}}, {"several clusters", []string{"east", "west"}}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(25, 2))
			nss := []string{"a", "a-b", "b", ""} // "": cluster-scoped
			found := map[string][]*Object{}
			for _, res := range []string{"routes", "backends"} {
				for range 60 {
					found[res] = append(found[res], obj(nss[rng.IntN(len(nss))], fmt.Sprintf("r%d", rng.IntN(40)), tc.clusters[rng.IntN(len(tc.clusters))], rng))
				}
				found[res] = sortedAsBefore(found[res])
			}
			var cache PodCache
			var last []Resource
			for step := range 300 {
				res := []string{"routes", "backends"}[rng.IntN(2)]
				l := slices.Clone(found[res])
				for range rng.IntN(4) {
					switch i := rng.IntN(len(l) + 1); {
					case i == len(l) || rng.IntN(3) == 0: // an object added (or a name given again: replaced)
						l = append(l, obj(nss[rng.IntN(len(nss))], fmt.Sprintf("r%d", rng.IntN(40)), tc.clusters[rng.IntN(len(tc.clusters))], rng))
					case rng.IntN(2) == 0: // a new version
						l[i] = obj(l[i].Namespace(), l[i].Name(), l[i].cluster, rng)
					default:
						l = slices.Delete(l, i, i+1)
					}
				}
				if rng.IntN(20) == 0 { // every object a new version: more than are patched
					for i, o := range l {
						l[i] = obj(o.Namespace(), o.Name(), o.cluster, rng)
					}
				}
				slices.Reverse(l) // a new version of a name replaces the old one (the first stays)
				found[res] = sortedAsBefore(l)
				given := maps.Clone(found)
				if l := slices.Clone(found[res]); len(l) > 1 {
					switch rng.IntN(8) {
					case 0: // a source that does not sort
						rng.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
					case 1: // two kept objects swapped
						i := rng.IntN(len(l) - 1)
						l[i], l[i+1] = l[i+1], l[i]
					case 2:
						l = slices.Insert(l, rng.IntN(len(l)), nil)
					case 3:
						i := rng.IntN(len(l))
						l = slices.Insert(l, i, l[i])
					}
					given[res] = l
				}
				got := assembleResources(specs, given, &cache)
				if want := assembleResources(specs, given, nil); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: through the cache %v\nwithout %v", step, got, want)
				}
				for i, r := range got {
					if last != nil && slices.Equal(r.Objects, last[i].Objects) && r.Value != last[i].Value {
						t.Fatalf("step %d: %s made again though its objects are the last sync's", step, r.Name)
					}
				}
				last = got
			}
		})
	}
}

// TestByNameValuesAreAll: by_name's values are the all list itself (not a copy) when its keys
// are in the objects' order, made anew or patched through a PodCache (an object added, one
// deleted, a new version); when a namespace is another's prefix ("a" and "a-b"), they are
// not, and by_name still gives each key its object.
func TestByNameValuesAreAll(t *testing.T) {
	var specs watchspec.List
	if err := specs.Set("routes.v1.example.com;index=svc=label:svc"); err != nil {
		t.Fatal(err)
	}
	var conv ObjectConverter
	obj := func(ns, name, rv string) *Object {
		o, err := conv.FromUnstructured(map[string]any{"apiVersion": "example.com/v1", "kind": "Route",
			"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv, "labels": map[string]any{"svc": name}}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	check := func(step string, res Resource, shared bool) {
		t.Helper()
		all, _ := res.Value.Get("all")
		byName := lookup(res.Value, "by_name")
		if got := byName.ValuesAre(all.([]any)); got != shared {
			t.Errorf("%s: by_name's values are all: %v, want %v", step, got, shared)
		}
		for _, o := range res.Objects {
			if v, _ := byName.Get(o.key); v != any(o.obj) {
				t.Errorf("%s: by_name[%s] is not its object", step, o.key)
			}
		}
	}
	for _, tc := range []struct {
		namespaces []string
		shared     bool
	}{{[]string{"a", "b"}, true}, {[]string{"a", "a-b"}, false}} {
		var cache PodCache
		list := sortedAsBefore([]*Object{obj(tc.namespaces[0], "x", "1"), obj(tc.namespaces[0], "y", "1"), obj(tc.namespaces[1], "x", "1")})
		check("made anew", assembleResources(specs, map[string][]*Object{"routes": list}, &cache)[0], tc.shared)
		for _, c := range []struct {
			step string
			list []*Object
		}{
			{"an object added", sortedAsBefore(append(slices.Clone(list), obj(tc.namespaces[1], "w", "1")))},
			{"an object deleted", sortedAsBefore(list[1:])},
			{"a new version", sortedAsBefore([]*Object{list[0], obj(tc.namespaces[0], "y", "2"), list[2]})},
		} {
			res := assembleResources(specs, map[string][]*Object{"routes": c.list}, &cache)[0]
			if !reflect.DeepEqual(res, assembleResources(specs, map[string][]*Object{"routes": c.list}, nil)[0]) {
				t.Fatalf("%s %v: patched otherwise than made anew", c.step, tc.namespaces)
			}
			check(fmt.Sprintf("%s %v", c.step, tc.namespaces), res, tc.shared)
		}
	}
}
