package snapshot

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Overlay returns objs with the objects of over in place of those of the same kind, namespace
// and name, and added where objs has none (what `diff -f` proposes). Neither is changed.
func (o *Objects) Overlay(over *Objects) *Objects {
	c := *o
	c.ConfigMaps = overlayList(o.ConfigMaps, over.ConfigMaps, func(x *corev1.ConfigMap) string { return x.Namespace + "/" + x.Name })
	c.Secrets = overlayList(o.Secrets, over.Secrets, func(x *corev1.Secret) string { return x.Namespace + "/" + x.Name })
	sliceKey := func(x *discoveryv1.EndpointSlice) string { return x.Namespace + "/" + x.Name }
	c.EndpointSlices = overlayList(o.EndpointSlices, over.EndpointSlices, sliceKey)
	if len(over.ClusterEndpointSlices) > 0 {
		c.ClusterEndpointSlices = maps.Clone(o.ClusterEndpointSlices)
		if c.ClusterEndpointSlices == nil {
			c.ClusterEndpointSlices = map[string][]*discoveryv1.EndpointSlice{}
		}
		for cl, list := range over.ClusterEndpointSlices {
			c.ClusterEndpointSlices[cl] = overlayList(c.ClusterEndpointSlices[cl], list, sliceKey)
		}
	}
	// A pod given again replaces the pod of its cluster, whichever way the sources keep pods.
	replaced := map[Ref]bool{}
	for _, p := range over.Pods {
		replaced[Ref{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}] = true
	}
	for _, p := range over.ConvertedPods {
		replaced[p.Ref()] = true
	}
	c.Pods = append(filter(o.Pods, func(p *corev1.Pod) bool { return replaced[Ref{Kind: "Pod", Namespace: p.Namespace, Name: p.Name}] }), over.Pods...)
	c.ConvertedPods = append(filter(o.ConvertedPods, func(p *Pod) bool { return replaced[p.Ref()] }), over.ConvertedPods...)
	c.Origins = overlayOrigins(o.Origins, over)
	if len(over.Resources) > 0 {
		c.Resources = make(map[string][]*Object, len(o.Resources)+len(over.Resources))
		for name, list := range o.Resources {
			c.Resources[name] = list
		}
		for name, list := range over.Resources {
			c.Resources[name] = overlayList(c.Resources[name], list, func(x *Object) string { return x.cluster + "\x00" + x.Key() })
		}
	}
	return &c
}

// overlayOrigins are the origins of o's objects but those over replaces, and over's: an object
// given again is where over says, or nowhere known.
func overlayOrigins(o Origins, over *Objects) Origins {
	if len(o) == 0 {
		return over.Origins
	}
	replaced := map[Ref]bool{}
	for _, x := range over.ConfigMaps {
		replaced[Ref{Kind: "ConfigMap", Namespace: x.Namespace, Name: x.Name}] = true
	}
	for _, x := range over.Secrets {
		replaced[Ref{Kind: "Secret", Namespace: x.Namespace, Name: x.Name}] = true
	}
	if len(replaced) == 0 && len(over.Origins) == 0 {
		return o
	}
	out := make(Origins, len(o)+len(over.Origins))
	for ref, og := range o {
		obj := ref
		obj.Key = ""
		if !replaced[obj] {
			out[ref] = og
		}
	}
	maps.Copy(out, over.Origins)
	return out
}

// overlayList is list with each element of over in place of the one with its key, or added.
func overlayList[T any](list, over []T, key func(T) string) []T {
	if len(over) == 0 {
		return list
	}
	replaced := make(map[string]bool, len(over))
	for _, x := range over {
		replaced[key(x)] = true
	}
	out := filter(list, func(x T) bool { return replaced[key(x)] })
	return append(slices.Clip(out), over...)
}

// Delete returns objs without the object kind/namespace/name (ConfigMap, Secret, Pod,
// EndpointSlice, or a watched resource's kind), and whether it had it. objs is not changed.
func (o *Objects) Delete(kind, namespace, name string) (*Objects, bool) {
	c := *o
	before := len(o.ConfigMaps) + len(o.Secrets) + len(o.Pods) + len(o.ConvertedPods) + len(o.EndpointSlices)
	switch strings.ToLower(kind) {
	case "configmap":
		c.ConfigMaps = filter(o.ConfigMaps, func(x *corev1.ConfigMap) bool { return x.Namespace == namespace && x.Name == name })
	case "secret":
		c.Secrets = filter(o.Secrets, func(x *corev1.Secret) bool { return x.Namespace == namespace && x.Name == name })
	case "pod":
		c.Pods = filter(o.Pods, func(x *corev1.Pod) bool { return x.Namespace == namespace && x.Name == name })
		c.ConvertedPods = filter(o.ConvertedPods, func(x *Pod) bool { return x.Namespace() == namespace && x.Name() == name && x.cluster() == o.Home })
	case "endpointslice":
		c.EndpointSlices = filter(o.EndpointSlices, func(x *discoveryv1.EndpointSlice) bool { return x.Namespace == namespace && x.Name == name })
		if home := o.ClusterEndpointSlices[o.Home]; o.Home != "" {
			kept := filter(home, func(x *discoveryv1.EndpointSlice) bool { return x.Namespace == namespace && x.Name == name })
			if len(kept) < len(home) {
				c.ClusterEndpointSlices = maps.Clone(o.ClusterEndpointSlices)
				c.ClusterEndpointSlices[o.Home] = kept
				return &c, true
			}
		}
	default:
		// With several clusters, the home cluster's object: the one a change there deletes.
		out, ok := o.Without(Ref{Kind: kind, Namespace: namespace, Name: name, Cluster: o.Home})
		if !ok {
			// Watched objects carry their kind as the API does (Ingress): match it in any case.
			for _, list := range o.Resources {
				for _, x := range list {
					if strings.EqualFold(x.Kind(), kind) && x.Namespace() == namespace && x.Name() == name && x.cluster == o.Home {
						return o.Without(x.Ref())
					}
				}
			}
		}
		return out, ok
	}
	after := len(c.ConfigMaps) + len(c.Secrets) + len(c.Pods) + len(c.ConvertedPods) + len(c.EndpointSlices)
	return &c, after < before
}
