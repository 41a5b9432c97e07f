package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ns is the namespace of the bench's routes, Services and EndpointSlices (and the Gateway).
const ns = "bench"

// kind is what differs between the route kinds: the example template (whose header comment
// gives the sidecar's --watch and --env-allow), and the objects that route.
type kind struct {
	title   string // the routes' kind, plural
	example string // the ConfigMap of the template
	prefix  string // of the routes' names: route-00042, ing-00042
	// route is a route named name for host, each rule a path prefix to a Service.
	route func(name, host string, rules []rule) map[string]any
	// front are the objects the routes attach to (the Gateway).
	front []map[string]any
}

// rule is a path prefix routed to a Service's port 80 ("http").
type rule struct{ path, service string }

var kinds = map[string]kind{
	"httproute": {
		title:   "HTTPRoutes",
		example: "examples/templates/httproute.yaml",
		prefix:  "route",
		route:   httpRoute,
		// The example serves a Gateway once its GatewayClass exists and names the sidecar's
		// controller; both get their status written.
		front: []map[string]any{
			{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
				"metadata": map[string]any{"name": "haproxy-sidecar"},
				"spec":     map[string]any{"controllerName": "haproxy-sidecar.io/controller"}},
			{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
				"metadata": map[string]any{"name": "gw", "namespace": ns},
				"spec": map[string]any{"gatewayClassName": "haproxy-sidecar", "listeners": []any{
					map[string]any{"name": "http", "protocol": "HTTP", "port": int64(80)}}}}},
	},
	"ingress": {
		title:   "Ingresses",
		example: "examples/templates/ingress.yaml",
		prefix:  "ing",
		route:   ingress,
	},
}

func httpRoute(name, host string, rules []rule) map[string]any {
	var rs []any
	for _, r := range rules {
		rs = append(rs, map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": r.path}}},
			"backendRefs": []any{map[string]any{"name": r.service, "port": int64(80)}}})
	}
	return map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "gw"}},
			"hostnames": []any{host}, "rules": rs}}
}

func ingress(name, host string, rules []rule) map[string]any {
	var paths []any
	for _, r := range rules {
		paths = append(paths, map[string]any{"path": r.path, "pathType": "Prefix",
			"backend": map[string]any{"service": map[string]any{"name": r.service, "port": map[string]any{"name": "http"}}}})
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"ingressClassName": "haproxy-sidecar",
			"rules": []any{map[string]any{"host": host, "http": map[string]any{"paths": paths}}}}}
}

// service is a Service whose port 80, "http", is the backends' port.
func service(name string, port int) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(port)}}}}
}

// endpoint is a ready endpoint: a pod's address.
type endpoint struct{ pod, addr string }

// endpointSlice is the EndpointSlice of Service name with the ready endpoints eps on port.
func endpointSlice(name string, port int, eps ...endpoint) map[string]any {
	var es []any
	for _, e := range eps {
		es = append(es, map[string]any{"addresses": []any{e.addr}, "conditions": map[string]any{"ready": true},
			"targetRef": map[string]any{"kind": "Pod", "namespace": ns, "name": e.pod}})
	}
	return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"name": name + "-abcde", "namespace": ns, "labels": map[string]any{"kubernetes.io/service-name": name}},
		"addressType": "IPv4",
		"ports":       []any{map[string]any{"name": "http", "port": int64(port), "protocol": "TCP"}},
		"endpoints":   es}
}

func objects(ms ...map[string]any) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(ms))
	for i, m := range ms {
		out[i] = &unstructured.Unstructured{Object: m}
	}
	return out
}

// The bench's names and addresses. Backend i (a listener answering its name) stands for the
// one pod of Service i for i < n, of the new Service i for n <= i < n+changes, and for the pod
// added by change i-n-changes beyond.
func svcName(i int) string { return fmt.Sprintf("svc-%05d", i) }
func podName(i int) string { return svcName(i) + "-pod" }
func addr(i int) string    { return fmt.Sprintf("127.1.%d.%d", i/250, i%250+1) }
