// Package objstatus writes the status of the Kubernetes objects the live configuration serves,
// once HAProxy confirmed it (docs/status.md):
//
//   - Ingresses: status.loadBalancer.ingress, the published address (--publish-service's load
//     balancer, or --publish-address);
//   - GatewayClasses (of the sidecar's controllerName): the Accepted and SupportedVersion
//     conditions;
//   - Gateways: the Accepted and Programmed conditions, status.addresses (the published ones,
//     or those the rendering declares), and status.listeners (each listener's conditions,
//     supportedKinds and attachedRoutes) when the rendering declares listeners;
//   - HTTPRoutes: one status.parents entry per parent, under the sidecar's controllerName
//     (--status-controller-name), with the Accepted and ResolvedRefs conditions; the entries of
//     other controllers are left alone;
//   - the services ConfigMap: the annotations haproxy-sidecar.io/live-config (the live
//     rendering's hash) and haproxy-sidecar.io/live-since.
//
// Which objects a rendering serves is not known to Go: the templates declare them, in comment
// lines of haproxy.cfg, which HAProxy ignores (Parse):
//
//	# haproxy-sidecar: serves Ingress web/shop
//	# haproxy-sidecar: serves GatewayClass haproxy-sidecar generation=1
//	# haproxy-sidecar: serves Gateway lb/haproxy generation=2 addresses=10.244.0.5
//	# haproxy-sidecar: serves Gateway lb/haproxy generation=2 listener=http attached=3 kinds=HTTPRoute
//	# haproxy-sidecar: serves HTTPRoute web/shop generation=5 parent=lb/haproxy section=http accepted resolved=false reason=BackendNotFound message="..."
//
// The deciding is pure, from tables: Parse and Collect read the declarations, Confirmed says
// whether a rendering is confirmed live (and by every Data Plane API host, and by the leader),
// IngressStatus, GatewayClassStatus, GatewayStatus, RouteParents and LiveAnnotations compute what an object's
// status becomes from what it has (changed or not). Writer is the code that acts: it follows
// what HAProxy runs (live.State, polled), reads the objects and writes only what changes.
package objstatus
