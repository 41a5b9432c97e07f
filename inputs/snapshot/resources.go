package snapshot

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// Resource is a watched resource (--watch) as templates see it: resources.<Name>.
type Resource struct {
	Name string
	// Objects are the resource's objects, sorted by namespace, then name.
	Objects []*Object
	// Value is what templates read as resources.<Name>: a dict of
	//   all      the objects, sorted by namespace, then name;
	//   by_name  "namespace/name" (or "name" for a cluster-scoped object) -> the object;
	//   by_NAME  for each index: "namespace/value" (or "value") -> the list of the objects with
	//            that value, sorted as all.
	Value *record.Record
}

// assembleResources builds the resources the options name from the objects the source found
// (objs.Resources, by context name), in the order of the options. A resource without objects
// is there, empty. A resource whose objects are the very ones of cache's last Assemble (the
// same pointers: a changed object is a new one) is that Assemble's, its lookups not made again,
// and one of which a few objects changed has that Assemble's lookups patched (issue 25): a
// change costs what changed, not the size of the resources.
func assembleResources(specs watchspec.List, found map[string][]*Object, cache *PodCache) []Resource {
	if len(specs) == 0 {
		return nil
	}
	last := cache.lastResources()
	out := make([]Resource, 0, len(specs))
	kept := make(map[string]Resource, len(specs))
	for _, spec := range specs {
		key := spec.String() // what the Value is made of, with the objects
		r := resourceFrom(spec, found[spec.Name()], last[key])
		out, kept[key] = append(out, r), r
	}
	cache.keepResources(kept)
	return out
}

// resourceFrom is the resource of spec with the objects list (as the source found them): last
// (the last Assemble's, if any: Value set) when its objects are the same, else with last's
// lookups patched for the objects that changed when they are few, else made anew.
func resourceFrom(spec watchspec.Resource, list []*Object, last Resource) Resource {
	objs := list
	if last.Value != nil {
		// list, sorted (checked where it differs from last's), is the objects; else sorted here.
		changes, ok := diffObjects(last.Objects, objs, maxPatched(len(objs)))
		if !ok {
			objs = sortedObjects(list)
			changes, ok = diffObjects(last.Objects, objs, maxPatched(len(objs)))
		}
		switch {
		case !ok: // many changes: made anew
		case len(changes) == 0:
			return last
		default:
			if v, ok := patchedValue(spec, last.Value, objs, changes); ok {
				return Resource{Name: spec.Name(), Objects: objs, Value: v}
			}
		}
	}
	objs = sortedObjects(objs)
	return Resource{Name: spec.Name(), Objects: objs, Value: resourceValue(spec, objs, true)}
}

// sortedObjects is list without nils, sorted by compareObjects, one object per name (and
// cluster: a source gives each once; the first stays if not). A list that is so already (the
// kube source keeps its lists sorted, issue 25) is returned as it is: checking costs a
// fraction of a sort. list is not modified.
func sortedObjects(list []*Object) []*Object {
	if strictlySorted(list, compareObjects) {
		return list
	}
	objs := slices.DeleteFunc(slices.Clone(list), func(o *Object) bool { return o == nil })
	slices.SortStableFunc(objs, compareObjects)
	return slices.CompactFunc(objs, func(a, b *Object) bool { return a.key == b.key && a.cluster == b.cluster })
}

// strictlySorted reports whether list has no nil and each object comes after the one before
// it by cmp (so none is there twice).
func strictlySorted(list []*Object, cmp func(a, b *Object) int) bool {
	for i, o := range list {
		if o == nil || i > 0 && cmp(list[i-1], o) >= 0 {
			return false
		}
	}
	return true
}

// compareObjects orders by namespace, then name.
func compareObjects(a, b *Object) int {
	if c := strings.Compare(a.Namespace(), b.Namespace()); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name(), b.Name()); c != 0 {
		return c
	}
	return compareClusters(a, b)
}

// resourceValue is what templates see of one resource (see Resource.Value); split adds
// by_cluster when the objects come from several clusters.
func resourceValue(spec watchspec.Resource, objs []*Object, split bool) *record.Record {
	all := make([]any, len(objs))
	for i, o := range objs {
		all[i] = o.obj
	}
	keys := []string{"all", "by_name"}
	vals := []any{all, objectsByName(objs, all)}
	for _, ix := range spec.Indexes {
		keys = append(keys, "by_"+ix.Name)
		vals = append(vals, indexed(ix, objs))
	}
	if split {
		if clusters := byCluster(objs, func(l []*Object) *record.Record { return resourceValue(spec, l, false) }); clusters != nil {
			keys = append(keys, "by_cluster")
			vals = append(vals, clusters)
		}
	}
	return record.FromPairs(nil, keys, vals)
}

// objectsByName is the record "namespace/name" -> object; objs are sorted by compareObjects,
// all are their records in that order. When the keys are in that order too (but for a
// namespace that is another's prefix, see keyOrder) and each is there once (one cluster), the
// record's values are all itself: the same values in the same order, not a copy.
func objectsByName(objs []*Object, all []any) *record.Record {
	sorted := keyOrder(objs)
	// The same name in another cluster: the first cluster's (by name); by_cluster has each.
	first := func(i int) bool { return i == 0 || sorted[i-1].key != sorted[i].key }
	names := make([]string, 0, len(sorted))
	for i, o := range sorted {
		if first(i) {
			names = append(names, o.key)
		}
	}
	if len(names) == len(objs) && (len(objs) == 0 || &sorted[0] == &objs[0]) {
		return record.New(record.TakeKeys(names), all)
	}
	vals := make([]any, 0, len(names))
	for i, o := range sorted {
		if first(i) {
			vals = append(vals, o.obj)
		}
	}
	return record.New(record.TakeKeys(names), vals)
}

// keyOrder is objs in the order of their keys, stably (an object in several clusters keeps
// their order). That is the order of objs, sorted by compareObjects, unless a namespace is
// another's prefix followed by a character before "/": "a-b/x" < "a/x" where "a" < "a-b".
// The keys of two namespaces compare the same way whatever the names, so each namespace's run
// of objects moves whole: a sort of the namespaces rather than of the objects. objs is not
// modified.
func keyOrder(objs []*Object) []*Object {
	byKey := func(a, b *Object) int { return strings.Compare(a.key, b.key) }
	if slices.IsSortedFunc(objs, byKey) {
		return objs
	}
	var runs [][]*Object
	for i := 0; i < len(objs); {
		j := i + 1
		for j < len(objs) && objs[j].Namespace() == objs[i].Namespace() {
			j++
		}
		runs, i = append(runs, objs[i:j]), j
	}
	slices.SortStableFunc(runs, func(a, b []*Object) int { return byKey(a[0], b[0]) })
	out := slices.Concat(runs...)
	if !slices.IsSortedFunc(out, byKey) { // objs not sorted by compareObjects, or cluster-scoped objects among namespaced ones
		out = slices.Clone(objs)
		slices.SortStableFunc(out, byKey)
	}
	return out
}

// indexed is the record "namespace/value" -> the objects with that value, in the order of objs.
func indexed(ix watchspec.Index, objs []*Object) *record.Record {
	lists := map[string][]any{}
	var values []string
	for _, o := range objs {
		for _, key := range indexKeys(ix, o, &values) {
			lists[key] = append(lists[key], o.obj)
		}
	}
	m := make(map[string]any, len(lists))
	for k, l := range lists {
		m[k] = l
	}
	return record.FromMap(nil, m) // keys that are data: a key list of its own
}

// indexKeys are the keys of o in the index ix: "namespace/value" (or "value") for each of
// its values, once each, sorted; in *buf, which it reuses.
func indexKeys(ix watchspec.Index, o *Object, buf *[]string) []string {
	values := indexValues(ix, o, (*buf)[:0])
	slices.Sort(values)
	values = slices.Compact(values)
	if ns := o.Namespace(); ns != "" {
		for i, v := range values {
			values[i] = ns + "/" + v
		}
	}
	*buf = values
	return values
}

// indexValues appends the values of o that ix indexes it by.
func indexValues(ix watchspec.Index, o *Object, out []string) []string {
	if ix.Label != "" {
		if v, ok := o.Labels().Lookup(ix.Label); ok {
			out = append(out, v)
		}
		return out
	}
	return fieldValues(o.obj, ix.Field, out)
}

// fieldValues appends the scalar values at path in v: a list on the way is walked, each
// element in turn.
func fieldValues(v any, path []string, out []string) []string {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = fieldValues(e, path, out)
		}
		return out
	case *record.Record:
		if len(path) == 0 {
			return out
		}
		next, ok := x.Get(path[0])
		if !ok {
			return out
		}
		return fieldValues(next, path[1:], out)
	}
	if len(path) > 0 {
		return out
	}
	switch x := v.(type) {
	case string:
		return append(out, x)
	case int64:
		return append(out, strconv.FormatInt(x, 10))
	case float64:
		return append(out, strconv.FormatFloat(x, 'g', -1, 64))
	case bool:
		return append(out, strconv.FormatBool(x))
	}
	return out
}

// Without returns objs without the pod or the watched object ref names (a Ref without a Key:
// Kind, Namespace, Name), and whether objs had one. objs is not changed: the lists that lose an
// object are copies.
func (o *Objects) Without(ref Ref) (*Objects, bool) {
	if ref.Key != "" || ref.Name == "" {
		return o, false
	}
	c := *o
	found := false
	if ref.Kind == "Pod" {
		isPod := func(p *corev1.Pod) bool {
			return p != nil && ref.Cluster == "" && p.Namespace == ref.Namespace && p.Name == ref.Name
		}
		if slices.ContainsFunc(o.Pods, isPod) {
			c.Pods, found = slices.DeleteFunc(slices.Clone(o.Pods), isPod), true
		}
		isConverted := func(p *Pod) bool { return p != nil && p.Ref() == ref }
		if slices.ContainsFunc(o.ConvertedPods, isConverted) {
			c.ConvertedPods, found = slices.DeleteFunc(slices.Clone(o.ConvertedPods), isConverted), true
		}
	}
	isObject := func(x *Object) bool {
		return x != nil && x.Namespace() == ref.Namespace && x.Name() == ref.Name && x.Kind() == ref.Kind && x.cluster == ref.Cluster
	}
	cloned := false
	for name, list := range o.Resources {
		if !slices.ContainsFunc(list, isObject) {
			continue
		}
		if !cloned {
			c.Resources, cloned = maps.Clone(o.Resources), true
		}
		c.Resources[name], found = slices.DeleteFunc(slices.Clone(list), isObject), true
	}
	if !found {
		return o, false
	}
	return &c, true
}

// Ref names the object in reports.
func (o *Object) Ref() Ref {
	return Ref{Kind: cmp.Or(o.Kind(), "Object"), Namespace: o.Namespace(), Name: o.Name(), Cluster: o.cluster}
}
