package snapshot

import (
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// endpointIndex finds the EndpointSlices of a Kubernetes Service: namespace/service -> slices.
type endpointIndex map[string][]*discoveryv1.EndpointSlice

func newEndpointIndex(slices []*discoveryv1.EndpointSlice) endpointIndex {
	ix := endpointIndex{}
	for _, s := range slices {
		if s == nil {
			continue
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		key := s.Namespace + "/" + svc
		ix[key] = append(ix[key], s)
	}
	return ix
}

// endpoints returns the ready endpoints of namespace/service shaped like the pods a selector
// gives, so templates need not care which kind of service they render: the key is the pod's
// name (or the address for an endpoint without a pod), with status.podIP, spec.nodeName,
// metadata, and "endpoint" holding what the EndpointSlice says (addresses, zone, hostname,
// ports). Only ready endpoints (ready unset counts as ready, as kube-proxy reads it).
func (ix endpointIndex) endpoints(namespace, service string) map[string]any {
	out := map[string]any{}
	for _, s := range ix[namespace+"/"+service] {
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
			out[name] = map[string]any{
				"metadata": map[string]any{"name": name, "namespace": namespace},
				"spec":     spec,
				"status":   map[string]any{"podIP": ep.Addresses[0], "phase": "Running"},
				"endpoint": endpoint,
			}
		}
	}
	return out
}
