package snapshot

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Cluster objects are the data nobody edits by hand: pods, EndpointSlices and the objects of
// watched resources. They are not operator inputs, but one of them can still hold a value
// HAProxy refuses (a pod's address, an annotation a template prints): then it is left out, as
// a pod that is not ready would be, while everything else goes live.

// ClusterObject is one cluster object of an Objects: its name in reports, and the value that
// stands for its version: its resourceVersion, else the object itself (sources hand over a new
// one when it changes).
type ClusterObject struct {
	Ref     Ref
	version any
}

// ID names the object among the held inputs: "pod/NAMESPACE/NAME", "endpointslice/...",
// "ingress/...".
func (c ClusterObject) ID() string { return ObjectID(c.Ref) }

// ObjectID names a cluster object among the held inputs.
func ObjectID(ref Ref) string {
	id := lower(ref.Kind) + "/" + ref.Namespace + "/" + ref.Name
	if ref.Cluster != "" {
		id += "@" + ref.Cluster // two clusters' objects of one name are two objects
	}
	return id
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ClusterObjects lists the cluster objects of objs, sorted by ID.
func (o *Objects) ClusterObjects() []ClusterObject {
	out := make([]ClusterObject, 0, len(o.Pods)+len(o.ConvertedPods)+len(o.EndpointSlices))
	for _, p := range o.Pods {
		if p != nil {
			out = append(out, ClusterObject{Ref: Ref{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}, version: versionOf(p.ResourceVersion, p)})
		}
	}
	for _, p := range o.ConvertedPods {
		if p != nil {
			out = append(out, ClusterObject{Ref: p.Ref(), version: p})
		}
	}
	for _, s := range o.EndpointSlices {
		if s != nil {
			out = append(out, ClusterObject{Ref: Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name}, version: versionOf(s.ResourceVersion, s)})
		}
	}
	for c, list := range o.ClusterEndpointSlices {
		for _, s := range list {
			if s != nil {
				out = append(out, ClusterObject{Ref: Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name, Cluster: c}, version: versionOf(s.ResourceVersion, s)})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.Resources)) {
		for _, x := range o.Resources[name] {
			if x != nil {
				out = append(out, ClusterObject{Ref: x.Ref(), version: versionOf(x.ResourceVersion(), x)})
			}
		}
	}
	slices.SortFunc(out, func(a, b ClusterObject) int { return cmp.Compare(a.ID(), b.ID()) })
	return out
}

// versionOf is rv when the source gave one, else the object.
func versionOf(rv string, obj any) any {
	if rv != "" {
		return rv
	}
	return obj
}

// ChangedSince lists the cluster objects of objs that good (an earlier Objects) did not have,
// or had in another version; all of them when good is nil.
func (o *Objects) ChangedSince(good *Objects) []ClusterObject {
	now := o.ClusterObjects()
	if good == nil {
		return now
	}
	was := map[string]any{}
	for _, c := range good.ClusterObjects() {
		was[c.ID()] = c.version
	}
	var out []ClusterObject
	for _, c := range now {
		if v, ok := was[c.ID()]; !ok || v != c.version {
			out = append(out, c)
		}
	}
	return out
}

// Revert returns objs with the cluster objects whose IDs are in drop left out: pods, as if they
// were not ready; EndpointSlices and watched objects too, unless good (an earlier Objects, or
// nil) has them, then at good's version. kept lists the IDs put back at good's version. objs
// is not changed: the lists that change are copies.
func (o *Objects) Revert(drop map[string]bool, good *Objects) (reverted *Objects, kept map[string]bool) {
	c := o.WithoutObjects(drop)
	if good == nil || len(drop) == 0 {
		return c, nil
	}
	kept = map[string]bool{}
	for _, s := range good.EndpointSlices {
		if s != nil && drop[ObjectID(Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name})] {
			c.EndpointSlices = append(slices.Clip(c.EndpointSlices), s)
			kept[ObjectID(Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name})] = true
		}
	}
	for name, list := range good.Resources {
		for _, x := range list {
			if x != nil && drop[ObjectID(x.Ref())] {
				if c.Resources == nil { // o had none: WithoutObjects made no map of its own
					c.Resources = map[string][]*Object{}
				}
				c.Resources[name] = append(slices.Clip(c.Resources[name]), x)
				kept[ObjectID(x.Ref())] = true
			}
		}
	}
	return c, kept
}

// WithoutObjects returns objs without the cluster objects whose IDs are in drop. objs is not
// changed: the lists that lose an object are copies.
func (o *Objects) WithoutObjects(drop map[string]bool) *Objects {
	if len(drop) == 0 {
		return o
	}
	c := *o
	pod := func(ns, name string) bool { return drop[ObjectID(Ref{Kind: "Pod", Namespace: ns, Name: name})] }
	c.Pods = filter(o.Pods, func(p *corev1.Pod) bool { return p != nil && pod(p.Namespace, p.Name) })
	c.ConvertedPods = filter(o.ConvertedPods, func(p *Pod) bool { return p != nil && drop[ObjectID(p.Ref())] })
	c.EndpointSlices = filter(o.EndpointSlices, func(s *discoveryv1.EndpointSlice) bool {
		return s != nil && drop[ObjectID(Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name})]
	})
	if len(o.ClusterEndpointSlices) > 0 {
		c.ClusterEndpointSlices = make(map[string][]*discoveryv1.EndpointSlice, len(o.ClusterEndpointSlices))
		for cl, list := range o.ClusterEndpointSlices {
			c.ClusterEndpointSlices[cl] = filter(list, func(s *discoveryv1.EndpointSlice) bool {
				return s != nil && drop[ObjectID(Ref{Kind: "EndpointSlice", Namespace: s.Namespace, Name: s.Name, Cluster: cl})]
			})
		}
	}
	if len(o.Resources) > 0 {
		c.Resources = make(map[string][]*Object, len(o.Resources))
		for name, list := range o.Resources {
			c.Resources[name] = filter(list, func(x *Object) bool { return x != nil && drop[ObjectID(x.Ref())] })
		}
	}
	return &c
}

// filter is list without the elements out says, the same slice when none is dropped.
func filter[T any](list []T, out func(T) bool) []T {
	if !slices.ContainsFunc(list, out) {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), out)
}
