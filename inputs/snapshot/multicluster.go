package snapshot

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// With several clusters (the kube source's --cluster), every pod and watched object carries
// the name of the cluster it came from: templates read it as pod.cluster (object.cluster), a
// service's "clusters" list picks whose pods feed it, and resources.X.by_cluster splits a
// resource by cluster. With one cluster nothing carries a name and the context is as it was.

// ClusterKey is the top-level key the cluster's name is under in a pod or an object.
const ClusterKey = "cluster"

// clusterShapes shares the key lists of the records with a cluster: the pods' fields plus
// "cluster" are a schema, not data.
type clusterShapes struct{ s record.Shapes }

// with returns r with key "cluster" set to name (r when name is "").
func (c *clusterShapes) with(r *record.Record, name string) *record.Record {
	if name == "" || r == nil {
		return r
	}
	keys := make([]string, 0, r.Len()+1)
	vals := make([]any, 0, r.Len()+1)
	for k, v := range r.All() {
		keys, vals = append(keys, k), append(vals, v)
	}
	return record.FromPairs(&c.s, append(keys, ClusterKey), append(vals, name))
}

// ConvertIn is Convert for a pod of the named cluster (see Pod.Cluster): its template form
// has the key "cluster".
func (c *PodConverter) ConvertIn(p *corev1.Pod, cluster string) *Pod {
	pod := c.Convert(p)
	if cluster != "" {
		pod.setCluster(cluster)
		pod.obj = c.shapes.with(pod.obj, cluster)
		pod.labels = labelsOf(pod.obj)
	}
	return pod
}

// Cluster is the name of the cluster the pod is in ("" with one cluster).
func (p *Pod) Cluster() string { return p.cluster() }

// Ref names the pod in reports.
func (p *Pod) Ref() Ref {
	return Ref{Kind: "Pod", Namespace: p.namespace, Name: p.name, Cluster: p.cluster()}
}

// InCluster returns o as an object of the named cluster: its record has the key "cluster".
// o is not changed.
func (c *ObjectConverter) InCluster(o *Object, cluster string) *Object {
	if cluster == "" {
		return o
	}
	x := *o
	x.cluster = cluster
	x.obj = c.clusters.with(o.obj, cluster)
	return &x
}

// Cluster is the name of the cluster the object is in ("" with one cluster).
func (o *Object) Cluster() string { return o.cluster }

// CheckClusterName says whether name may name a cluster: a DNS label (it is a label value,
// part of a server name, and never has a "/" or a ":").
func CheckClusterName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q: %s", name, msgs[0])
	}
	return nil
}

// serviceClusters reads a service entry's optional "clusters": the clusters whose pods feed
// it; nil (absent) means every cluster. v is its value, ok whether the entry has it.
func serviceClusters(v any, ok bool) ([]string, error) {
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("field \"clusters\" is a JSON %s: want a list of cluster names", jsonType(v))
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("field \"clusters\" holds a JSON %s: want cluster names (strings)", jsonType(x))
		}
		if err := CheckClusterName(s); err != nil {
			return nil, fmt.Errorf("field \"clusters\": %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// inClusters keeps the pods of the named clusters; nil names every cluster.
func inClusters(pods []*podEntry, clusters []string) []*podEntry {
	if clusters == nil {
		return pods
	}
	return slices.DeleteFunc(pods, func(p *podEntry) bool { return !slices.Contains(clusters, p.cluster()) })
}

// podKeyName is a pod's key in a service's "pods": its name, or with several clusters
// "CLUSTER:NAME", so that two clusters' pods of one name stay apart (and the key is still a
// valid HAProxy server name).
func podKeyName(p *podEntry) string {
	if c := p.cluster(); c != "" {
		return c + ":" + p.name()
	}
	return p.name()
}

func (e *podEntry) cluster() string {
	if e.conv != nil {
		return e.conv.cluster()
	}
	return ""
}

// byCluster is resources.X.by_cluster: each cluster's name -> what resources.X is, for its
// objects alone (all, by_name, by_INDEX); nil when no object has a cluster.
func byCluster(objs []*Object, value func([]*Object) *record.Record) *record.Record {
	split := map[string][]*Object{}
	for _, o := range objs {
		if o.cluster != "" {
			split[o.cluster] = append(split[o.cluster], o)
		}
	}
	if len(split) == 0 {
		return nil
	}
	m := make(map[string]any, len(split))
	for c, list := range split {
		m[c] = value(list)
	}
	return record.FromMap(nil, m)
}

// compareClusters orders objects of one name by cluster.
func compareClusters(a, b *Object) int { return cmp.Compare(a.cluster, b.cluster) }

// InHome returns over (objects a change proposes, read from a manifest) as objects of the home
// cluster when o has several clusters: its pods, EndpointSlices and watched objects carry the
// home cluster's name, as the ones they replace do. Without several clusters, over itself.
func (o *Objects) InHome(over *Objects) *Objects {
	if o.Home == "" {
		return over
	}
	c := *over
	var pods PodConverter
	c.Pods, c.ConvertedPods = nil, nil
	for _, p := range over.ConvertedPods {
		if p != nil && p.cluster() == "" {
			x := *p
			x.setCluster(o.Home)
			x.obj = pods.shapes.with(p.obj, o.Home)
			x.labels = labelsOf(x.obj)
			p = &x
		}
		c.ConvertedPods = append(c.ConvertedPods, p)
	}
	for _, p := range over.Pods {
		c.ConvertedPods = append(c.ConvertedPods, pods.ConvertIn(p, o.Home))
	}
	if len(over.EndpointSlices) > 0 {
		c.EndpointSlices = nil
		c.ClusterEndpointSlices = map[string][]*discoveryv1.EndpointSlice{o.Home: over.EndpointSlices}
	}
	if len(over.Resources) > 0 {
		var conv ObjectConverter
		c.Resources = make(map[string][]*Object, len(over.Resources))
		for name, list := range over.Resources {
			for _, x := range list {
				c.Resources[name] = append(c.Resources[name], conv.InCluster(x, o.Home))
			}
		}
	}
	return &c
}
