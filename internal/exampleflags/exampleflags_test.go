package exampleflags

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The flags are read from the example's header comment, as its users read them.
func TestArgsOfTheHTTPRouteExample(t *testing.T) {
	example, err := os.ReadFile("../../examples/templates/httproute.yaml")
	if err != nil {
		t.Fatal(err)
	}
	args, err := Args(example)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(args, " "), "--watch "); n != 7 {
		t.Errorf("%d --watch flags, want 7: %q", n, args)
	}
	if i := slices.Index(args, "--env-allow"); i < 0 || !strings.Contains(args[i+1], "GATEWAY_CLASS") ||
		!strings.Contains(args[i+1], "GATEWAY_ADDRESSES") || !strings.Contains(args[i+1], "GATEWAY_CONTROLLER") {
		t.Errorf("--env-allow: %q, want GATEWAY_CLASS, GATEWAY_ADDRESSES and GATEWAY_CONTROLLER among them (the conformance harness sets them)", args)
	}
	if !slices.Contains(args, "gateways.v1.gateway.networking.k8s.io;status=addresses") {
		t.Errorf("a quoted --watch value with options is not read whole: %q", args)
	}
	if _, err := Args([]byte("# nothing\n")); err == nil {
		t.Error("a header without flags: no error")
	}
}

// The Ingress example gives --env-allow within a sentence, and its watched resources one a line
// beside an HAPROXY_SIDECAR_WATCH line that is not a --watch flag.
func TestWatchAndEnvAllowOfTheIngressExample(t *testing.T) {
	example, err := os.ReadFile("../../examples/templates/ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ingresses.v1.networking.k8s.io;status=off", "services.v1",
		"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name"}
	if got := Watch(example); !slices.Equal(got, want) {
		t.Errorf("Watch = %q, want %q", got, want)
	}
	if got := EnvAllow(example); got != "HTTP_BIND,HTTPS_BIND,INGRESS_CLASS" {
		t.Errorf("EnvAllow = %q", got)
	}
}
