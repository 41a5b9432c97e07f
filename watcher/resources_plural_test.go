package watcher

import "testing"

// TestPluralOf: plurals as the API server names resources, for the kinds the file source must
// match without a kind= hint.
func TestPluralOf(t *testing.T) {
	for kind, want := range map[string]string{
		"Ingress": "ingresses", "HTTPRoute": "httproutes", "Gateway": "gateways", "GatewayClass": "gatewayclasses",
		"EndpointSlice": "endpointslices", "NetworkPolicy": "networkpolicies", "Node": "nodes", "Endpoints": "endpoints",
	} {
		if got := pluralOf(kind); got != want {
			t.Errorf("pluralOf(%q) = %q, want %q", kind, got, want)
		}
	}
}
