package snapshot

import (
	"fmt"
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
		got := assembleResources(specs, map[string][]*Object{"routes": list})
		sorted := assembleResources(specs, map[string][]*Object{"routes": want})
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
