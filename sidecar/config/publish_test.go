package config

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestPublishFlags: --publish-service, --publish-address and --status-controller-name, from the
// command line and their HAPROXY_SIDECAR_ twins, and what validation refuses.
func TestPublishFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want Publish
		bad  string // in the error; "" for none
	}{
		{name: "defaults", args: []string{"--source=kube"},
			want: Publish{ControllerName: DefaultControllerName}},
		{name: "a Service", args: []string{"--source=kube", "--publish-service", "lb/haproxy"},
			want: Publish{Service: "lb/haproxy", ControllerName: DefaultControllerName}},
		{name: "addresses, repeated and comma-separated", args: []string{"--source=kube", "--publish-address", "203.0.113.7", "--publish-address", "lb.example.com,2001:db8::1"},
			want: Publish{Addresses: List{"203.0.113.7", "lb.example.com", "2001:db8::1"}, ControllerName: DefaultControllerName}},
		{name: "from the environment", args: []string{"--source=kube"},
			env:  map[string]string{"HAPROXY_SIDECAR_PUBLISH_ADDRESS": "203.0.113.7,lb.example.com", "HAPROXY_SIDECAR_STATUS_CONTROLLER_NAME": "example.com/lb"},
			want: Publish{Addresses: List{"203.0.113.7", "lb.example.com"}, ControllerName: "example.com/lb"}},
		{name: "a Service without namespace", args: []string{"--source=kube", "--publish-service", "haproxy"}, bad: "want NAMESPACE/NAME"},
		{name: "both", args: []string{"--source=kube", "--publish-service", "lb/haproxy", "--publish-address", "203.0.113.7"}, bad: "exclude each other"},
		{name: "not an address", args: []string{"--source=kube", "--publish-address", "LB_example"}, bad: "want an IP address or a host name"},
		{name: "a controller name without path", args: []string{"--source=kube", "--status-controller-name", "example.com"}, bad: "want DOMAIN/PATH"},
		{name: "another source", args: []string{"--source=file", "--dir", ".", "--publish-address", "203.0.113.7"}, bad: "need --source=kube"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRun(tc.args, "", func(k string) string { return tc.env[k] }, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Validate()
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("Validate() = %v, want an error with %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Publish.Service != tc.want.Service || !slices.Equal(r.Publish.Addresses, tc.want.Addresses) || r.Publish.ControllerName != tc.want.ControllerName {
				t.Errorf("Publish = %+v, want %+v", r.Publish, tc.want)
			}
		})
	}
}
