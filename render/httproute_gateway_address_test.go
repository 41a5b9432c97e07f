package render

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

// TestGatewayKeepsItsAddress: with GATEWAY_ADDRESSES each Gateway of the HTTPRoute example has
// an address of its own, the oldest the first; once its status gives it (the sidecar wrote
// it), it keeps it when an older Gateway goes, where it used to move to the freed one (a
// client that had read the Gateway's address found nothing there); a new Gateway takes the
// first free address.
func TestGatewayKeepsItsAddress(t *testing.T) {
	raw := httprouteObjects(2)
	tpl := loadConfigMapData(t, "../examples/templates/httproute.yaml")
	gateway := func(name string, age int, status string) map[string]any {
		gw := deepCopy(raw["gateways"][0]).(map[string]any)
		md := gw["metadata"].(map[string]any)
		md["name"], md["creationTimestamp"] = name, fmt.Sprintf("2026-01-01T00:00:%02dZ", age)
		if status != "" {
			gw["status"] = map[string]any{"addresses": []any{map[string]any{"type": "IPAddress", "value": status}}}
		}
		return gw
	}
	bind := regexp.MustCompile(`(?m)^frontend fe_bench_(\w+)_80\n  bind ([0-9.]+):80$`)
	addresses := func(gws ...map[string]any) map[string]string {
		t.Helper()
		raw["gateways"] = gws
		objs, opts := benchObjects(t, raw, httprouteWatch...)
		snap, err := snapshot.Assemble(objs, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap.Templates, snap.TemplateKey = tpl, "template"
		snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
		snap.Env = map[string]string{"GATEWAY_ADDRESSES": "10.0.0.1,10.0.0.2,10.0.0.3"}
		out, err := New(Options{SSLDir: "/etc/haproxy/certs", MapsDir: "/etc/haproxy/maps"}).Render(context.Background(), snap)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, m := range bind.FindAllStringSubmatch(string(out.Config), -1) {
			got[m[1]] = m[2]
		}
		return got
	}
	check := func(what string, got map[string]string, want map[string]string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: addresses %v, want %v", what, got, want)
		}
	}
	check("new Gateways, oldest first", addresses(gateway("a", 1, ""), gateway("b", 2, ""), gateway("c", 3, "")),
		map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"})
	check("the oldest gone", addresses(gateway("b", 2, "10.0.0.2"), gateway("c", 3, "10.0.0.3")),
		map[string]string{"b": "10.0.0.2", "c": "10.0.0.3"})
	check("a new one in the freed address", addresses(gateway("b", 2, "10.0.0.2"), gateway("c", 3, "10.0.0.3"), gateway("d", 4, "")),
		map[string]string{"b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.0.1"})
	check("an address two statuses give: the older keeps it", addresses(gateway("b", 2, "10.0.0.2"), gateway("c", 3, "10.0.0.2")),
		map[string]string{"b": "10.0.0.2", "c": "10.0.0.1"})
	check("an address no longer in the list", addresses(gateway("b", 2, "10.0.0.9")),
		map[string]string{"b": "10.0.0.1"})
}
