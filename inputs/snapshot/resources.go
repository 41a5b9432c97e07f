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
// is there, empty.
func assembleResources(specs watchspec.List, found map[string][]*Object) []Resource {
	if len(specs) == 0 {
		return nil
	}
	out := make([]Resource, 0, len(specs))
	for _, spec := range specs {
		objs := slices.Clone(found[spec.Name()])
		objs = slices.DeleteFunc(objs, func(o *Object) bool { return o == nil })
		slices.SortStableFunc(objs, compareObjects)
		// One object per name (and cluster): a source gives each once; the first stays if not.
		objs = slices.CompactFunc(objs, func(a, b *Object) bool { return a.key == b.key && a.cluster == b.cluster })
		out = append(out, Resource{Name: spec.Name(), Objects: objs, Value: resourceValue(spec, objs, true)})
	}
	return out
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
	vals := []any{all, objectsByName(objs)}
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

// objectsByName is the record "namespace/name" -> object.
func objectsByName(objs []*Object) *record.Record {
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b *Object) int { return strings.Compare(a.key, b.key) })
	names := make([]string, 0, len(sorted))
	vals := make([]any, 0, len(sorted))
	for _, o := range sorted {
		if n := len(names); n > 0 && names[n-1] == o.key {
			continue // the same name in another cluster: the first cluster's (by name); by_cluster has each
		}
		names, vals = append(names, o.key), append(vals, o.obj)
	}
	return record.New(record.NewKeys(names...), vals)
}

// indexed is the record "namespace/value" -> the objects with that value, in the order of objs.
func indexed(ix watchspec.Index, objs []*Object) *record.Record {
	lists := map[string][]any{}
	var values []string
	for _, o := range objs {
		values = indexValues(ix, o, values[:0])
		slices.Sort(values)
		values = slices.Compact(values)
		for _, v := range values {
			key := v
			if ns := o.Namespace(); ns != "" {
				key = ns + "/" + v
			}
			lists[key] = append(lists[key], o.obj)
		}
	}
	m := make(map[string]any, len(lists))
	for k, l := range lists {
		m[k] = l
	}
	return record.FromMap(nil, m) // keys that are data: a key list of its own
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
