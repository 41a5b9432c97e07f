package render

import (
	"bytes"
	"context"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// The sidecar writes a Gateway's status (attachedRoutes) after each change of its routes, and
// that write comes back as a change of the Gateway: it must not compute every route's part of
// the HTTPRoute example again, since no route's part reads a Gateway's status. A change of the
// Gateway's spec still does, and the output stays a new renderer's.
func TestGatewayStatusComputesNoRouteAgain(t *testing.T) {
	const n = 50
	raw := httprouteObjects(n)
	tpl := loadConfigMapData(t, "../examples/templates/httproute.yaml")
	objs, opts := benchObjects(t, raw, httprouteWatch...)
	r := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout})
	build := func(r *Renderer) *Bundle {
		t.Helper()
		snap, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		out, err := r.Render(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	setGateway := func(edit func(gw map[string]any)) {
		t.Helper()
		gw := deepCopy(raw["gateways"][0]).(map[string]any)
		edit(gw)
		var conv snapshot.ObjectConverter
		o, err := conv.FromUnstructured(gw)
		if err != nil {
			t.Fatal(err)
		}
		objs.Resources["gateways"][0] = o
	}
	sameAsNew := func(got *Bundle) {
		t.Helper()
		want := build(New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps", Timeout: largeWorldTimeout}))
		if !bytes.Equal(got.Config, want.Config) || !bytes.Equal(got.Maps["routes.map"], want.Maps["routes.map"]) {
			t.Fatal("the output differs from a new renderer's")
		}
	}
	build(r)

	setGateway(func(gw map[string]any) {
		gw["status"] = map[string]any{"listeners": []any{map[string]any{"name": "http", "attachedRoutes": int64(n)}}}
	})
	// Reused: not computed (a block of routes taken whole imports none of its routes' parts).
	before := r.Computed("route.j2")
	sameAsNew(build(r))
	if got := n - (r.Computed("route.j2") - before); got != n {
		t.Errorf("after the Gateway's status changed, %d of %d route parts reused, want all", got, n)
	}

	setGateway(func(gw map[string]any) {
		l := gw["spec"].(map[string]any)["listeners"].([]any)[0].(map[string]any)
		l["allowedRoutes"] = map[string]any{"namespaces": map[string]any{"from": "All"}}
	})
	before = r.Computed("route.j2")
	sameAsNew(build(r))
	if got := n - (r.Computed("route.j2") - before); got != 0 {
		t.Errorf("after the Gateway's listeners changed, %d route parts reused, want none: each reads them", got)
	}
}
