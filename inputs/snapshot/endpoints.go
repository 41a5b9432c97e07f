package snapshot

import (
	"maps"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// endpointIndex finds the EndpointSlices of a Kubernetes Service: namespace/service -> slices.
// With several clusters, the slices of each cluster are apart (byCluster), and the endpoints
// they give carry its name as pods do.
type endpointIndex map[string][]clusterSlice

type clusterSlice struct {
	cluster string
	*discoveryv1.EndpointSlice
}

func newEndpointIndex(list []*discoveryv1.EndpointSlice, byCluster map[string][]*discoveryv1.EndpointSlice) endpointIndex {
	ix := endpointIndex{}
	add := func(cluster string, s *discoveryv1.EndpointSlice) {
		if s == nil {
			return
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			return
		}
		key := s.Namespace + "/" + svc
		ix[key] = append(ix[key], clusterSlice{cluster, s})
	}
	for _, s := range list {
		add("", s)
	}
	for _, c := range slices.Sorted(maps.Keys(byCluster)) {
		for _, s := range byCluster[c] {
			add(c, s)
		}
	}
	return ix
}

// slices returns the EndpointSlices of namespace/service in clusters (nil: all): what its
// endpoints are made of.
func (ix endpointIndex) slices(namespace, service string, clusters []string) []clusterSlice {
	var out []clusterSlice
	for _, s := range ix[namespace+"/"+service] {
		if clusters == nil || slices.Contains(clusters, s.cluster) {
			out = append(out, s)
		}
	}
	return out
}

// endpoints returns the ready endpoints of list (the slices of a Service of namespace) shaped
// like the pods a selector gives, so templates need not care which kind of service they
// render: the key is the pod's name (or the address for an endpoint without a pod), with
// status.podIP, spec.nodeName, metadata, and "endpoint" holding what the EndpointSlice says
// (addresses, zone, hostname, ports). Only ready endpoints (ready unset counts as ready, as
// kube-proxy reads it).
func endpoints(namespace string, list []clusterSlice) map[string]any {
	out := map[string]any{}
	for _, s := range list {
		var ports []any
		for _, p := range s.Ports {
			port := map[string]any{}
			if p.Name != nil {
				port["name"] = *p.Name
			}
			if p.Port != nil {
				port["port"] = int64(*p.Port)
			}
			if p.Protocol != nil {
				port["protocol"] = string(*p.Protocol)
			}
			ports = append(ports, port)
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) ||
				(ep.Conditions.Terminating != nil && *ep.Conditions.Terminating) {
				continue
			}
			name := "ep-" + strings.NewReplacer(".", "-", ":", "-").Replace(ep.Addresses[0])
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name != "" {
				name = ep.TargetRef.Name
			}
			addrs := make([]any, len(ep.Addresses))
			for i, a := range ep.Addresses {
				addrs[i] = a
			}
			endpoint := map[string]any{"addresses": addrs, "ready": true, "ports": ports}
			spec := map[string]any{}
			if ep.NodeName != nil {
				endpoint["nodeName"] = *ep.NodeName
				spec["nodeName"] = *ep.NodeName
			}
			if ep.Zone != nil {
				endpoint["zone"] = *ep.Zone
			}
			if ep.Hostname != nil {
				endpoint["hostname"] = *ep.Hostname
			}
			entry := map[string]any{
				"metadata": map[string]any{"name": name, "namespace": namespace},
				"spec":     spec,
				"status":   map[string]any{"podIP": ep.Addresses[0], "phase": "Running"},
				"endpoint": endpoint,
			}
			if s.cluster != "" {
				entry[ClusterKey] = s.cluster
				name = s.cluster + ":" + name // as podKeyName
			}
			out[name] = entry
		}
	}
	return out
}
