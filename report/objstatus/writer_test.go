package objstatus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/reload/live"
	"github.com/haproxy-sidecar/haproxy-sidecar/render"
)

const me = "haproxy-sidecar.io/controller"

// fixture is a Writer over fake clients holding an Ingress, a Gateway, an HTTPRoute, the
// published Service and the services ConfigMap, and the live state it reads.
type fixture struct {
	w    *Writer
	logs *bytes.Buffer
	cs   *fake.Clientset
	dyn  *dynamicfake.FakeDynamicClient
	st   live.State
	now  time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{now: t0, logs: &bytes.Buffer{}}
	f.cs = fake.NewClientset(
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "shop"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "haproxy"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb", Name: "services"}},
	)
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"namespace": "lb", "name": "gw", "generation": int64(1)},
		"spec":     map[string]any{"gatewayClassName": "haproxy-sidecar"},
	}}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"namespace": "web", "name": "r", "generation": int64(2)},
		"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "gw", "namespace": "lb"}, map[string]any{"name": "nginx", "namespace": "lb"}}},
		"status": map[string]any{"parents": []any{map[string]any{
			"parentRef":      map[string]any{"name": "nginx", "namespace": "lb"},
			"controllerName": "example.com/nginx",
			"conditions":     []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "1970-01-01T00:00:00Z"}},
		}}},
	}}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		resources[KindGateway]: "GatewayList", resources[KindHTTPRoute]: "HTTPRouteList", resources[KindGatewayClass]: "GatewayClassList",
	})
	// Created under their resources: the fake would guess "gatewaies" from the kind.
	for gvr, o := range map[schema.GroupVersionResource]*unstructured.Unstructured{resources[KindGateway]: gw, resources[KindHTTPRoute]: route} {
		if err := f.dyn.Tracker().Create(gvr, o, o.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(Config{Client: f.cs, Dynamic: f.dyn, Live: func() live.State { return f.st },
		Namespace: "lb", ServicesConfigMap: "services", PublishService: "lb/haproxy", ControllerName: me,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.now = func() time.Time { return f.now }
	f.w = w
	return f
}

// writes are the writes made since the last call, sorted: "VERB RESOURCE/SUBRESOURCE
// NAMESPACE/NAME".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range append(f.cs.Actions(), f.dyn.Actions()...) {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch x := a.(type) {
		case k8stesting.UpdateAction:
			o, _ := x.GetObject().(metav1.Object)
			name = o.GetName()
		case k8stesting.PatchAction:
			name = x.GetName()
		}
		out = append(out, fmt.Sprintf("%s %s/%s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace(), name))
	}
	f.cs.ClearActions()
	f.dyn.ClearActions()
	slices.Sort(out)
	return out
}

func bundleOf(decls ...string) *render.Bundle {
	cfg := "global\n# " + strings.Join(decls, "\n# ") + "\n"
	return &render.Bundle{Config: []byte(cfg), Hash: fmt.Sprintf("%x", len(cfg))}
}

func (f *fixture) route(t *testing.T) []any {
	t.Helper()
	u, err := f.dyn.Resource(resources[KindHTTPRoute]).Namespace("web").Get(context.Background(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	return parents
}

func (f *fixture) ingress(t *testing.T) []networkingv1.IngressLoadBalancerIngress {
	t.Helper()
	ing, err := f.cs.NetworkingV1().Ingresses("web").Get(context.Background(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ing.Status.LoadBalancer.Ingress
}

// TestWriter: nothing is written before HAProxy confirmed a rendering; then each declared
// object's status and the ConfigMap's annotations, once; nothing again while nothing changes
// (a full resync reads but does not write); an object no longer declared gets back what was
// written; a standby writes nothing.
func TestWriter(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := bundleOf(
		"haproxy-sidecar: serves Ingress web/shop",
		"haproxy-sidecar: serves Gateway lb/gw generation=1",
		`haproxy-sidecar: serves HTTPRoute web/r generation=2 parent=lb/gw resolved=false reason=BackendNotFound message="Service web/missing not found"`,
	)

	f.st = live.State{LoadsAtStart: first.Hash, Good: live.Good{Bundle: first}}
	f.w.Tick(ctx)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("written while HAProxy does not run: %v", w)
	}

	f.st = live.State{Runs: first.Hash, Live: first.Hash, LiveSince: t0, Good: live.Good{Bundle: first}}
	f.w.Tick(ctx)
	want := []string{"patch configmaps/ lb/services", "update gateways/status lb/gw", "update httproutes/status web/r", "update ingresses/status web/shop"}
	if w := f.writes(); strings.Join(w, "\n") != strings.Join(want, "\n") {
		t.Fatalf("writes %v, want %v", w, want)
	}
	if got := f.ingress(t); len(got) != 1 || got[0].IP != "203.0.113.7" {
		t.Errorf("the Ingress's addresses %+v", got)
	}
	parents := f.route(t)
	if len(parents) != 2 || parents[0].(map[string]any)["controllerName"] != "example.com/nginx" || parents[1].(map[string]any)["controllerName"] != me {
		t.Fatalf("the route's parents %v", parents)
	}
	if conds := parents[1].(map[string]any)["conditions"].([]any); conds[1].(map[string]any)["reason"] != "BackendNotFound" || conds[1].(map[string]any)["observedGeneration"] != int64(2) {
		t.Errorf("the route's conditions %v", conds)
	}
	cm, _ := f.cs.CoreV1().ConfigMaps("lb").Get(ctx, "services", metav1.GetOptions{})
	if cm.Annotations[AnnotationLiveConfig] != first.Hash || cm.Annotations[AnnotationLiveSince] != ts0 {
		t.Errorf("the ConfigMap's annotations %v", cm.Annotations)
	}

	f.now = t0.Add(time.Second)
	f.w.Tick(ctx)
	f.now = t0.Add(DefaultResync + time.Second) // a full resync: everything read, nothing written
	f.w.Tick(ctx)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("written again with nothing changed: %v", w)
	}

	second := bundleOf("haproxy-sidecar: serves Gateway lb/gw generation=1")
	f.st = live.State{Runs: second.Hash, Live: second.Hash, LiveSince: t1, Good: live.Good{Bundle: second}}
	f.w.Tick(ctx)
	want = []string{"patch configmaps/ lb/services", "update httproutes/status web/r", "update ingresses/status web/shop"}
	if w := f.writes(); strings.Join(w, "\n") != strings.Join(want, "\n") {
		t.Fatalf("writes %v, want %v", w, want)
	}
	if got := f.ingress(t); len(got) != 0 {
		t.Errorf("the Ingress no longer served keeps %+v", got)
	}
	if parents := f.route(t); len(parents) != 1 || parents[0].(map[string]any)["controllerName"] != "example.com/nginx" {
		t.Errorf("the route no longer served: parents %v", parents)
	}

	third := bundleOf("haproxy-sidecar: serves Ingress web/shop")
	f.st = live.State{Runs: third.Hash, Live: third.Hash, LiveSince: t1, Good: live.Good{Bundle: third}}
	f.w.cfg.Standby = func() bool { return true }
	f.w.Tick(ctx)
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("a standby wrote %v", w)
	}
	f.w.cfg.Standby = func() bool { return false }
	f.w.Tick(ctx)
	if got := f.ingress(t); len(got) != 1 {
		t.Errorf("the new leader did not write the Ingress: %+v", got)
	}
}

// TestWriterWarnsOnce: a declaration the writer cannot read is a warning once, not again with
// each rendering that still has it; the other declarations stand.
func TestWriterWarnsOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i, extra := range []string{"a", "b"} {
		b := bundleOf("haproxy-sidecar: serves Ingress web/shop", "haproxy-sidecar: serves Ingres web/typo", extra+" (another rendering)")
		b.Hash = extra
		f.st = live.State{Live: b.Hash, LiveSince: t0.Add(time.Duration(i) * time.Second), Good: live.Good{Bundle: b}}
		f.w.Tick(ctx)
	}
	if n := strings.Count(f.logs.String(), `kind \"Ingres\"`); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, f.logs.String())
	}
	if got := f.ingress(t); len(got) != 1 {
		t.Errorf("the Ingress declared beside the bad line: %+v", got)
	}
}

// TestWriterWarns: an Ingress declared with a warning gets a Warning Event once HAProxy runs
// the rendering, once (not again with each rendering that still says it), again when it
// changes; nothing while HAProxy does not run it.
func TestWriterWarns(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var got []string
	f.w.cfg.Warn = func(obj runtime.Object, reason, message string) {
		ing := obj.(*networkingv1.Ingress)
		got = append(got, ing.Namespace+"/"+ing.Name+" "+reason+": "+message)
	}
	first := bundleOf(`haproxy-sidecar: serves Ingress web/shop warning="annotation x: not supported" warning.reason=UnsupportedAnnotation`)
	f.st = live.State{LoadsAtStart: first.Hash, Good: live.Good{Bundle: first}}
	f.w.Tick(ctx)
	if len(got) != 0 {
		t.Fatalf("warned while HAProxy does not run the rendering: %v", got)
	}
	f.st = live.State{Runs: first.Hash, Live: first.Hash, LiveSince: t0, Good: live.Good{Bundle: first}}
	f.w.Tick(ctx)
	again := bundleOf(`haproxy-sidecar: serves Ingress web/shop warning="annotation x: not supported" warning.reason=UnsupportedAnnotation`, "another rendering")
	f.st = live.State{Runs: again.Hash, Live: again.Hash, LiveSince: t1, Good: live.Good{Bundle: again}}
	f.w.Tick(ctx)
	changed := bundleOf(`haproxy-sidecar: serves Ingress web/shop warning="annotation y: not supported"`)
	f.st = live.State{Runs: changed.Hash, Live: changed.Hash, LiveSince: t1, Good: live.Good{Bundle: changed}}
	f.w.Tick(ctx)
	want := []string{"web/shop UnsupportedAnnotation: annotation x: not supported", "web/shop " + DefaultWarningReason + ": annotation y: not supported"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings %q, want %q", got, want)
	}
}

// TestWriterGatewayClass: the GatewayClass declared gets Accepted and SupportedVersion when its
// controllerName is the sidecar's; another controller's class is left alone, with a warning.
func TestWriterGatewayClass(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gvr := resources[KindGatewayClass]
	for name, controller := range map[string]string{"haproxy-sidecar": me, "nginx": "example.com/nginx"} {
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
			"metadata": map[string]any{"name": name, "generation": int64(3)},
			"spec":     map[string]any{"controllerName": controller},
		}}
		if err := f.dyn.Tracker().Create(gvr, o, ""); err != nil {
			t.Fatal(err)
		}
	}
	b := bundleOf("haproxy-sidecar: serves GatewayClass haproxy-sidecar", "haproxy-sidecar: serves GatewayClass nginx")
	f.st = live.State{Runs: b.Hash, Live: b.Hash, LiveSince: t0, Good: live.Good{Bundle: b}}
	f.w.Tick(ctx)
	want := []string{"patch configmaps/ lb/services", "update gatewayclasses/status /haproxy-sidecar"}
	if w := f.writes(); strings.Join(w, "\n") != strings.Join(want, "\n") {
		t.Fatalf("writes %v, want %v", w, want)
	}
	u, err := f.dyn.Resource(gvr).Get(ctx, "haproxy-sidecar", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if len(conds) != 2 || conds[0].(map[string]any)["type"] != Accepted || conds[1].(map[string]any)["type"] != SupportedVersion || conds[1].(map[string]any)["observedGeneration"] != int64(3) {
		t.Errorf("the class's conditions %v", conds)
	}
	if !strings.Contains(f.logs.String(), "another controller's") || !strings.Contains(f.logs.String(), "example.com/nginx") {
		t.Errorf("no warning for the other controller's class:\n%s", f.logs.String())
	}
}

// TestWriterWritesWhatANewRenderingChangedFirst: a rendering that goes live while the status
// of many objects is being written (the start) stops that round within supersededEvery
// writes; the next round writes what the new rendering changed (a route added, sorted last)
// before the rest, and every object once; the ConfigMap is annotated for the new rendering
// only.
func TestWriterWritesWhatANewRenderingChangedFirst(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const n = 50
	var decls []string
	for i := range n + 1 {
		name := fmt.Sprintf("a%02d", i)
		if i == n {
			name = "z-new"
		}
		route := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"namespace": "web", "name": name, "generation": int64(1)},
			"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "gw", "namespace": "lb"}}},
		}}
		if err := f.dyn.Tracker().Create(resources[KindHTTPRoute], route, "web"); err != nil {
			t.Fatal(err)
		}
		decls = append(decls, "haproxy-sidecar: serves HTTPRoute web/"+name+" generation=1 parent=lb/gw accepted resolved")
	}
	first, second := bundleOf(decls[:n]...), bundleOf(decls...)
	f.st = live.State{Runs: first.Hash, Live: first.Hash, LiveSince: t0, Good: live.Good{Bundle: first}}
	var order []string
	f.dyn.PrependReactor("update", "httproutes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o, _ := a.(k8stesting.UpdateAction).GetObject().(metav1.Object)
		order = append(order, o.GetName())
		if len(order) == 5 { // the new rendering goes live
			f.st = live.State{Runs: second.Hash, Live: second.Hash, LiveSince: t1, Good: live.Good{Bundle: second}}
		}
		return false, nil, nil
	})
	f.w.Tick(ctx)
	if len(order) != supersededEvery {
		t.Fatalf("the first round wrote %d routes, want %d (it stops at the first look after the new rendering)", len(order), supersededEvery)
	}
	f.w.Tick(ctx)
	if len(order) != n+1 {
		t.Fatalf("%d route writes, want %d (each once): %v", len(order), n+1, order)
	}
	if order[supersededEvery] != "z-new" {
		t.Errorf("after the first round, %s written first, want the route the new rendering added: %v", order[supersededEvery], order)
	}
	var patches []string
	for _, a := range f.cs.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, string(p.GetPatch()))
		}
	}
	if len(patches) != 1 || !strings.Contains(patches[0], second.Hash) {
		t.Errorf("ConfigMap patches %v, want one, for the new rendering %s", patches, second.Hash)
	}
}

// compareObjects orders as the objects' String forms do, including kinds that prefix each other,
// objects without a namespace and names holding the separators.
func TestCompareObjectsAsStrings(t *testing.T) {
	objs := []Object{
		{Kind: "Gateway", Namespace: "lb", Name: "a"},
		{Kind: "GatewayClass", Name: "haproxy"},
		{Kind: "Gateway", Name: "lb"},
		{Kind: "Gateway", Namespace: "l", Name: "b/a"},
		{Kind: "Gateway", Namespace: "lb", Name: ""},
		{Kind: "Gateway", Namespace: "lb/", Name: "a"},
		{Kind: "Gateway ", Name: "lb"},
		{Kind: "", Namespace: "a", Name: "b"},
		{Kind: "Ingress", Namespace: "web", Name: "shop"},
		{Kind: "Ingress", Namespace: "web", Name: "shop-2"},
		{Kind: "Ingress", Namespace: "web-2", Name: "shop"},
		{Kind: "HTTPRoute", Namespace: "web", Name: "shop"},
		{},
	}
	for _, a := range objs {
		for _, b := range objs {
			if got, want := compareObjects(a, b), strings.Compare(a.String(), b.String()); got != want {
				t.Errorf("compareObjects(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
