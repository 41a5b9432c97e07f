package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/haproxy-sidecar/haproxy-sidecar/internal/dataplanetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/haproxytest"
	"github.com/haproxy-sidecar/haproxy-sidecar/internal/kubetest"
	"github.com/haproxy-sidecar/haproxy-sidecar/report/objstatus"
)

// publishedService creates lb/haproxy, the LoadBalancer Service in front of HAProxy, with the
// address ip its load balancer got (written as a cloud's controller would: there is none).
func publishedService(t *testing.T, k *kubetest.Env, ip string) {
	t.Helper()
	ctx := context.Background()
	svc, err := k.Client.CoreV1().Services("lb").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "haproxy", Namespace: "lb"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if _, err := k.Client.CoreV1().Services("lb").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ingressAddresses are the addresses an Ingress of namespace web has in its status.
func ingressAddresses(t *testing.T, k *kubetest.Env, name string) []string {
	t.Helper()
	ing, err := k.Client.NetworkingV1().Ingresses("web").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ing.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return out
}

func liveAnnotations(t *testing.T, k *kubetest.Env) (hash, since string) {
	t.Helper()
	cm, err := k.Client.CoreV1().ConfigMaps("lb").Get(context.Background(), "services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Annotations[objstatus.AnnotationLiveConfig], cm.Annotations[objstatus.AnnotationLiveSince]
}

// TestStatusIngress runs examples/templates/ingress.yaml with --publish-service as its header
// says, against a real kube-apiserver and HAProxy: while HAProxy does not run, the
// configuration is written and the Ingresses' status stays empty; once HAProxy runs it, the
// Ingresses of the class get the Service's load-balancer address, the Ingress of another class
// keeps its own, and the services ConfigMap gets the live configuration's hash and time; a new
// Ingress gets its address only once HAProxy routes it; an Ingress that leaves the class gets
// its address taken back.
func TestStatusIngress(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	ctx := context.Background()
	const example = "../examples/templates/ingress.yaml"
	watch := applyIngressExample(t, k, e)
	publishedService(t, k, "203.0.113.7")
	// The Ingress of another class has the address its controller wrote.
	ing, err := k.Client.NetworkingV1().Ingresses("web").Get(ctx, "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.9"}}
	if _, err := k.Client.NetworkingV1().Ingresses("web").UpdateStatus(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	publish := exampleFlag(t, example, "publish-service")
	if publish[1] != "lb/haproxy" {
		t.Fatalf("the example's header says %v", publish)
	}
	e.startSidecar(t, append(append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms"}, watch...), publish...)...)

	t.Run("HAProxy does not run: the configuration is written, no status", func(t *testing.T) {
		var r readyz
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			_, r = e.readyz(t)
			return r.Written != ""
		}, "the configuration written while HAProxy does not run")
		// The writer looked at it, and waits.
		haproxytest.WaitFor(t, 10*time.Second, func() bool {
			return countLines(e.logs.String(), "status on the objects waits", "rendering="+r.Written) > 0
		}, "the status writer saw the configuration written, not live")
		for _, name := range []string{"shop", "legacy"} {
			if got := ingressAddresses(t, k, name); len(got) != 0 {
				t.Errorf("Ingress web/%s has %v before HAProxy runs its configuration", name, got)
			}
		}
		if hash, _ := liveAnnotations(t, k); hash != "" {
			t.Errorf("the services ConfigMap says %s is live before HAProxy runs", hash)
		}
	})

	e.startHAProxy(t)
	e.waitReady(t)

	t.Run("HAProxy runs it: the Ingresses of the class get the address", func(t *testing.T) {
		for _, name := range []string{"shop", "legacy"} {
			haproxytest.WaitFor(t, 15*time.Second, func() bool {
				return reflect.DeepEqual(ingressAddresses(t, k, name), []string{"203.0.113.7"})
			}, "Ingress web/"+name+" gets the load balancer's address")
		}
		waitRoutes(t, e, ingressExampleRoutes()...)
		if got := ingressAddresses(t, k, "other"); !reflect.DeepEqual(got, []string{"198.51.100.9"}) {
			t.Errorf("the Ingress of another class: %v, want its own controller's address", got)
		}
	})

	t.Run("the services ConfigMap: the live configuration's hash and time", func(t *testing.T) {
		e.settled(t)
		var live struct{ LiveConfig, LiveSince string }
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			resp, err := http.Get("http://" + e.health + "/readyz")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if json.NewDecoder(resp.Body).Decode(&live) != nil {
				return false
			}
			hash, since := liveAnnotations(t, k)
			return live.LiveConfig != "" && hash == live.LiveConfig && since == live.LiveSince
		}, "the services ConfigMap's annotations say what /readyz says is live")
	})

	t.Run("a new Ingress: its address once HAProxy routes it", func(t *testing.T) {
		if _, err := k.Client.NetworkingV1().Ingresses("web").Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "web"},
			Spec: networkingv1.IngressSpec{IngressClassName: ptrTo("haproxy-sidecar"),
				Rules: []networkingv1.IngressRule{ingressRule("new.example.com", ingressPath(networkingv1.PathTypePrefix, "/", "web", "http"))}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		haproxytest.WaitFor(t, 15*time.Second, func() bool { return len(ingressAddresses(t, k, "new")) == 1 }, "Ingress web/new gets the address")
		// Written once HAProxy confirmed the configuration that routes it: it routes it now.
		if code, body, _, err := e.get("new.example.com", "/"); err != nil || code != 200 || !strings.HasPrefix(body, "web-") {
			t.Errorf("Ingress web/new has its address, HAProxy answers %d %q %v", code, body, err)
		}
	})

	t.Run("an Ingress leaves the class: its address taken back", func(t *testing.T) {
		updateIngress(t, k, "legacy", func(ing *networkingv1.Ingress) {
			delete(ing.Annotations, "kubernetes.io/ingress.class")
			ing.Spec.IngressClassName = ptrTo("nginx")
		})
		haproxytest.WaitFor(t, 15*time.Second, func() bool { return len(ingressAddresses(t, k, "legacy")) == 0 }, "Ingress web/legacy's address taken back")
		if got := ingressAddresses(t, k, "shop"); len(got) != 1 {
			t.Errorf("Ingress web/shop: %v", got)
		}
	})
}

// gatewayResource is the dynamic client's resource of a Gateway API kind.
func gatewayResource(plural string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: plural}
}

// statusObjects are the GatewayClass, Gateways and HTTPRoutes of TestStatusHTTPRoute.
const statusObjects = gatewayClass + `---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: haproxy, namespace: lb}
spec:
  gatewayClassName: haproxy-sidecar
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
---
` + unadmittingGateways + `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb}, {name: other, namespace: lb}]
  hostnames: [shop.example.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: web}
spec:
  parentRefs: [{name: haproxy, namespace: lb}]
  hostnames: [broken.example.com]
  rules:
  - backendRefs: [{name: missing, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unattached, namespace: web}
spec:
  parentRefs: [{name: same-namespace, namespace: lb}]
  hostnames: [unattached.example.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
`

// routeParents are a route's status.parents by controllerName and parent name.
func routeParents(t *testing.T, dyn dynamic.Interface, name string) (map[string]map[string]any, int64) {
	t.Helper()
	u, err := dyn.Resource(gatewayResource("httproutes")).Namespace("web").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	out := map[string]map[string]any{}
	for _, p := range parents {
		m := p.(map[string]any)
		ref, _ := m["parentRef"].(map[string]any)
		out[fmt.Sprint(m["controllerName"], " ", ref["name"])] = m
	}
	return out, u.GetGeneration()
}

// condition is one condition of a list (unstructured), by type: "STATUS REASON" and its
// observedGeneration.
func condition(list any, typ string) (string, int64) {
	conds, _ := list.([]any)
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			g, _ := m["observedGeneration"].(int64)
			return fmt.Sprint(m["status"], " ", m["reason"]), g
		}
	}
	return "", 0
}

// TestStatusHTTPRoute runs examples/templates/httproute.yaml with --publish-address against a
// real kube-apiserver with the Gateway API CRDs and a real HAProxy: once HAProxy runs the
// configuration, each route gets one status.parents entry per parentRef to a Gateway of the
// class under the sidecar's controllerName (Accepted, ResolvedRefs, with observedGeneration):
// a backendRef to a missing Service is ResolvedRefs=False BackendNotFound, a listener that does
// not admit the route's namespace Accepted=False NotAllowedByListeners; another controller's
// entry is left alone; the Gateway of the class is Accepted and Programmed with the published
// address and its listener's status, the GatewayClass Accepted, the Gateway of another class
// untouched; the missing Service created, the route's
// references resolve; a route edited, observedGeneration follows.
func TestStatusHTTPRoute(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	ctx := context.Background()
	const example = "../examples/templates/httproute.yaml"
	const me = "haproxy-sidecar.io/controller"
	cacheDir := applyGatewayExample(t, k, example)
	applyService(t, k, service("web", "http", 80, e.port))
	putEndpointSlice(t, k, endpointSlice("web", "http", e.port, map[string]bool{"127.0.0.11": true}))
	kubectlApply(t, k, cacheDir, statusObjects)
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Another controller's entry on web/shop, for its Gateway.
	routes := dyn.Resource(gatewayResource("httproutes")).Namespace("web")
	shop, err := routes.Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]any{
		"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "other", "namespace": "lb"},
		"controllerName": "example.com/other",
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
			"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": shop.GetGeneration()}},
	}
	if err := unstructured.SetNestedSlice(shop.Object, []any{theirs}, "status", "parents"); err != nil {
		t.Fatal(err)
	}
	if _, err := routes.UpdateStatus(ctx, shop, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.startSidecar(t, append(append([]string{"--source=kube", "--kubeconfig", k.Kubeconfig, "--namespace", "lb", "--wait", "20ms:500ms"},
		exampleWatchFlags(t, example)...), "--publish-address", "203.0.113.8")...)
	e.startHAProxy(t)
	e.waitReady(t)

	t.Run("a backendRef to a missing Service: ResolvedRefs=False BackendNotFound", func(t *testing.T) {
		var parents map[string]map[string]any
		var gen int64
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			parents, gen = routeParents(t, dyn, "broken")
			s, g := condition(parents[me+" haproxy"]["conditions"], "ResolvedRefs")
			return s == "False BackendNotFound" && g == gen
		}, "web/broken's ResolvedRefs")
		conds := parents[me+" haproxy"]["conditions"]
		if s, g := condition(conds, "Accepted"); s != "True Accepted" || g != gen {
			t.Errorf("web/broken's Accepted: %q (observedGeneration %d), want True Accepted (%d)", s, g, gen)
		}
		if js, _ := json.Marshal(conds); !strings.Contains(string(js), "backendRef web/missing: no such Service") {
			t.Errorf("web/broken's conditions do not name the backendRef: %s", js)
		}
		if len(parents) != 1 {
			t.Errorf("web/broken's parents: %v", parents)
		}
	})

	t.Run("a route served: Accepted and ResolvedRefs; another controller's entry left alone", func(t *testing.T) {
		var parents map[string]map[string]any
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			parents, _ = routeParents(t, dyn, "shop")
			s, _ := condition(parents[me+" haproxy"]["conditions"], "ResolvedRefs")
			return s == "True ResolvedRefs"
		}, "web/shop's status")
		if s, _ := condition(parents[me+" haproxy"]["conditions"], "Accepted"); s != "True Accepted" {
			t.Errorf("web/shop's Accepted: %q", s)
		}
		if code, body, _, err := e.get("shop.example.com", "/"); err != nil || code != 200 || !strings.HasPrefix(body, "web-") {
			t.Errorf("web/shop is Accepted, HAProxy answers %d %q %v", code, body, err)
		}
		if !reflect.DeepEqual(parents["example.com/other other"], theirs) || len(parents) != 2 {
			t.Errorf("the other controller's entry: %v, want %v (and ours only besides)", parents["example.com/other other"], theirs)
		}
	})

	t.Run("a listener that does not admit the namespace: Accepted=False NotAllowedByListeners", func(t *testing.T) {
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			parents, _ := routeParents(t, dyn, "unattached")
			s, _ := condition(parents[me+" same-namespace"]["conditions"], "Accepted")
			return s == "False NotAllowedByListeners"
		}, "web/unattached's Accepted")
	})

	t.Run("the Gateway of the class: Accepted, Programmed, the published address; another class's untouched", func(t *testing.T) {
		gateways := dyn.Resource(gatewayResource("gateways")).Namespace("lb")
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			gw, err := gateways.Get(ctx, "haproxy", metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(gw.Object, "status", "conditions")
			addrs, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
			a, ag := condition(conds, "Accepted")
			p, pg := condition(conds, "Programmed")
			return a == "True Accepted" && p == "True Programmed" && ag == gw.GetGeneration() && pg == gw.GetGeneration() &&
				reflect.DeepEqual(addrs, []any{map[string]any{"type": "IPAddress", "value": "203.0.113.8"}})
		}, "lb/haproxy's status")
		// Its listener: accepted, programmed, its references resolved, the routes it admits.
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			gw, err := gateways.Get(ctx, "haproxy", metav1.GetOptions{})
			if err != nil {
				return false
			}
			ls, _, _ := unstructured.NestedSlice(gw.Object, "status", "listeners")
			if len(ls) != 1 {
				return false
			}
			l, _ := ls[0].(map[string]any)
			conds, _ := l["conditions"].([]any)
			a, _ := condition(conds, "Accepted")
			p, _ := condition(conds, "Programmed")
			r, _ := condition(conds, "ResolvedRefs")
			attached, _ := l["attachedRoutes"].(int64)
			return l["name"] == "http" && a == "True Accepted" && p == "True Programmed" && r == "True ResolvedRefs" && attached == 2
		}, "lb/haproxy's status.listeners")
		// The GatewayClass of the sidecar's controllerName: Accepted and SupportedVersion.
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			gc, err := dyn.Resource(gatewayResource("gatewayclasses")).Get(ctx, "haproxy-sidecar", metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(gc.Object, "status", "conditions")
			a, ag := condition(conds, "Accepted")
			v, _ := condition(conds, "SupportedVersion")
			return a == "True Accepted" && ag == gc.GetGeneration() && strings.HasPrefix(v, "True ")
		}, "GatewayClass haproxy-sidecar's status")
		other, err := gateways.Get(ctx, "other", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(other.Object, "status", "conditions")
		if s, _ := condition(conds, "Accepted"); s != "Unknown Pending" {
			t.Errorf("the Gateway of another class: Accepted %q, want the CRD's default (Unknown Pending)", s)
		}
	})

	t.Run("the missing Service created: the references resolve", func(t *testing.T) {
		applyService(t, k, service("missing", "http", 80, e.port))
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			parents, _ := routeParents(t, dyn, "broken")
			s, _ := condition(parents[me+" haproxy"]["conditions"], "ResolvedRefs")
			return s == "True ResolvedRefs"
		}, "web/broken's ResolvedRefs turns True")
	})

	t.Run("a route edited: observedGeneration follows", func(t *testing.T) {
		kubectlApply(t, k, cacheDir, strings.Replace(statusObjects, "hostnames: [shop.example.com]", "hostnames: [shop.example.com, www.shop.example.com]", 1))
		haproxytest.WaitFor(t, 15*time.Second, func() bool {
			parents, gen := routeParents(t, dyn, "shop")
			_, g := condition(parents[me+" haproxy"]["conditions"], "Accepted")
			return gen > 1 && g == gen
		}, "web/shop's observedGeneration is its new generation")
		if code, body, _, err := e.get("www.shop.example.com", "/"); err != nil || code != 200 || !strings.HasPrefix(body, "web-") {
			t.Errorf("the new hostname: %d %q %v", code, body, err)
		}
	})
}

// TestStatusRBAC: what the status needs, and no more: examples/kubernetes/rbac.yaml and
// rbac-status.yaml, and the chart (for the kinds it watches, the Service it publishes) grant
// update on the status subresources (not on the objects), patch on the services ConfigMap
// only, get on the published Service only.
func TestStatusRBAC(t *testing.T) {
	helm := helmBin(t)
	k := kubetest.Start(t)
	for _, ns := range []string{"lb", "web"} {
		k.Namespace(t, ns)
	}
	installGatewayAPI(t, k, t.TempDir())
	// can asks kubectl auth can-i: resource is RESOURCE[/NAME], with :status for the status
	// subresource.
	can := func(sa, verb, resource, ns string) string {
		args := []string{"--kubeconfig", k.Kubeconfig, "auth", "can-i", verb, strings.TrimSuffix(resource, ":status"), "--as", "system:serviceaccount:lb:" + sa}
		if strings.HasSuffix(resource, ":status") {
			args = append(args, "--subresource", "status")
		}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		out, _ := exec.Command(k.KubectlPath, args...).Output()
		return strings.TrimSpace(string(out))
	}
	type grant struct{ verb, resource, ns, want string }
	check := func(t *testing.T, sa string, grants []grant) {
		t.Helper()
		for _, g := range grants {
			if got := can(sa, g.verb, g.resource, g.ns); got != g.want {
				t.Errorf("%s can %s %s in %q: %q, want %q", sa, g.verb, g.resource, g.ns, got, g.want)
			}
		}
	}
	t.Run("examples/kubernetes", func(t *testing.T) {
		run(t, k.KubectlPath, "--kubeconfig", k.Kubeconfig, "apply", "-f", "../examples/kubernetes/rbac.yaml", "-f", "../examples/kubernetes/rbac-status.yaml")
		check(t, "haproxy-sidecar", []grant{
			{"update", "ingresses.networking.k8s.io:status", "web", "yes"}, {"update", "ingresses.networking.k8s.io", "web", "no"},
			{"update", "gateways.gateway.networking.k8s.io:status", "lb", "yes"}, {"update", "httproutes.gateway.networking.k8s.io:status", "web", "yes"},
			{"update", "httproutes.gateway.networking.k8s.io", "web", "no"},
			{"patch", "configmaps/services", "lb", "yes"}, {"patch", "configmaps/config", "lb", "no"}, {"update", "configmaps/services", "lb", "no"},
			{"get", "services/haproxy", "lb", "yes"}, {"get", "services/other", "lb", "no"},
		})
	})
	t.Run("the chart", func(t *testing.T) {
		out := run(t, helm, "template", "lb", "../charts/haproxy-sidecar", "--namespace", "lb", "--set", "status.publishService=lb/lb",
			"--set", "watch={ingresses.v1.networking.k8s.io,httproutes.v1.gateway.networking.k8s.io;namespace=web}")
		if !strings.Contains(string(out), `{name: HAPROXY_SIDECAR_PUBLISH_SERVICE, value: "lb/lb"}`) {
			t.Errorf("the Deployment has no HAPROXY_SIDECAR_PUBLISH_SERVICE=lb/lb")
		}
		kubectlApplyByNamespace(t, k, "lb", out)
		check(t, "lb", []grant{
			{"update", "ingresses.networking.k8s.io:status", "web", "yes"}, {"update", "ingresses.networking.k8s.io", "web", "no"},
			{"update", "httproutes.gateway.networking.k8s.io:status", "web", "yes"}, {"update", "httproutes.gateway.networking.k8s.io:status", "lb", "no"},
			{"update", "gateways.gateway.networking.k8s.io:status", "lb", "no"}, // not watched
			// The release's services ConfigMap (inputs are named after it), no other.
			{"patch", "configmaps/lb-services", "lb", "yes"}, {"patch", "configmaps/services", "lb", "no"}, {"patch", "configmaps/lb-config", "lb", "no"},
			{"get", "services/lb", "lb", "yes"}, {"get", "services/other", "lb", "no"},
		})
	})
}

// TestStatusDataPlaneEveryHost: with --reload=dataplane, the configuration is live once one host
// has it, but the status waits until every host has it: the services ConfigMap's annotation
// appears only once the host that was down caught up, with the hash of the configuration the
// hosts run.
func TestStatusDataPlaneEveryHost(t *testing.T) {
	k := kubetest.Start(t)
	e := newDemoEnv(t)
	applyExample(t, k, e)
	// The demo has no stats socket: a short reconnection after each reload. Both stand-ins'
	// HAProxy bind the same addresses (SO_REUSEPORT), as two machines would.
	a := dataplanetest.Start(t, dataplanetest.Options{RuntimeReconnect: 300 * time.Millisecond})
	b := dataplanetest.Start(t, dataplanetest.Options{RuntimeReconnect: 300 * time.Millisecond})
	b.Down()
	e.startSidecar(t, "--source=kube", "--kubeconfig", k.Kubeconfig, "--reload=dataplane", "--state-dir", t.TempDir(),
		"--dataplane-url", a.URL, "--dataplane-url", b.URL, "--dataplane-ssl-dir", a.StorageDir)
	r := e.waitReady(t)
	e.waitServed(t, "web.localhost", "/", "web-")
	haproxytest.WaitFor(t, 10*time.Second, func() bool {
		return countLines(e.logs.String(), "status on the objects waits", "not every Data Plane API host", "rendering="+r.LiveConfig) > 0
	}, "the status writer waits for the host that is down")
	if hash, _ := liveAnnotations(t, k); hash != "" {
		t.Fatalf("the services ConfigMap says %s is live while a host does not have it", hash)
	}
	b.Up(t)
	haproxytest.WaitFor(t, 30*time.Second, func() bool {
		hash, _ := liveAnnotations(t, k)
		return hash == r.LiveConfig
	}, "the annotation, once the host that was down has the configuration")
}
