package watchspec

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Resource // Labels is checked through Selector
		err  string   // a part of the error, "" for none
	}{
		{in: "ingresses.v1.networking.k8s.io", want: Resource{Resource: "ingresses", Version: "v1", Group: "networking.k8s.io"}},
		{in: "nodes.v1", want: Resource{Resource: "nodes", Version: "v1"}},
		{in: "pods.v1.", want: Resource{Resource: "pods", Version: "v1"}},
		{in: " crontabs.v1beta2.stable.example.com ", want: Resource{Resource: "crontabs", Version: "v1beta2", Group: "stable.example.com"}},
		{in: "endpointslices.v1.discovery.k8s.io;index=label:kubernetes.io/service-name", want: Resource{
			Resource: "endpointslices", Version: "v1", Group: "discovery.k8s.io",
			Indexes: []Index{{Name: "service_name", Label: "kubernetes.io/service-name"}}}},
		{in: "endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name;index=node=field:endpoints.nodeName", want: Resource{
			Resource: "endpointslices", Version: "v1", Group: "discovery.k8s.io",
			Indexes: []Index{{Name: "service", Label: "kubernetes.io/service-name"}, {Name: "node", Field: []string{"endpoints", "nodeName"}}}}},
		{in: "pods.v1;index=field:spec.nodeName", want: Resource{Resource: "pods", Version: "v1",
			Indexes: []Index{{Name: "nodeName", Field: []string{"spec", "nodeName"}}}}},
		{in: "ingresses.v1.networking.k8s.io; namespace=web ;selector=team=a,tier!=db", want: Resource{
			Resource: "ingresses", Version: "v1", Group: "networking.k8s.io", Namespace: "web", Selector: "team=a,tier!=db"}},
		{in: "httproutes.v1.gateway.networking.k8s.io;kind=HTTPRoute;as=routes", want: Resource{
			Resource: "httproutes", Version: "v1", Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", As: "routes"}},
		{in: "ingresses.v1.networking.k8s.io;;", want: Resource{Resource: "ingresses", Version: "v1", Group: "networking.k8s.io"}},
		{in: "httproutes.v1.gateway.networking.k8s.io;status=off", want: Resource{
			Resource: "httproutes", Version: "v1", Group: "gateway.networking.k8s.io", Status: Status{Off: true}}},
		{in: "gateways.v1.gateway.networking.k8s.io;status=addresses, conditions,addresses", want: Resource{
			Resource: "gateways", Version: "v1", Group: "gateway.networking.k8s.io", Status: Status{Fields: []string{"addresses", "conditions"}}}},
		{in: "services.v1;status=on", want: Resource{Resource: "services", Version: "v1"}},

		{in: "ingresses", err: "want PLURAL.VERSION.GROUP"},
		{in: "ingresses.networking.k8s.io", err: `"networking" is not an API version`},
		{in: "Ingresses.v1.networking.k8s.io", err: "is not a resource's plural name"},
		{in: "ingresses.v1.Networking", err: "is not an API group"},
		{in: "ingresses.v1.networking.k8s.io;namespace=Web", err: `namespace "Web"`},
		{in: "ingresses.v1.networking.k8s.io;selector=a in (", err: "selector"},
		{in: "ingresses.v1.networking.k8s.io;namespace", err: "want KEY=VALUE"},
		{in: "ingresses.v1.networking.k8s.io;namespace=", err: "namespace= needs a value"},
		{in: "ingresses.v1.networking.k8s.io;namespace=a;namespace=b", err: "namespace is given twice"},
		{in: "ingresses.v1.networking.k8s.io;colour=red", err: `unknown option "colour"`},
		{in: "ingresses.v1.networking.k8s.io;index=kubernetes.io/service-name", err: "want [NAME=]label:KEY"},
		{in: "ingresses.v1.networking.k8s.io;index=annotation:x", err: `"annotation": want label:KEY or field:PATH`},
		{in: "ingresses.v1.networking.k8s.io;index=label:-bad-", err: "label key"},
		{in: "ingresses.v1.networking.k8s.io;index=field:spec..host", err: "field path"},
		{in: "ingresses.v1.networking.k8s.io;index=my-index=label:a", err: `name "my-index"`},
		{in: "ingresses.v1.networking.k8s.io;index=field:metadata.name", err: `the name "name" is by_name's`},
		{in: "ingresses.v1.networking.k8s.io;index=label:a/x;index=field:spec.x", err: `two indexes are named "x"`},
		{in: "crontabs.v1.example.com;kind=crontab", err: `kind "crontab"`},
		{in: "crontabs.v1.example.com;as=cron-tabs", err: `as "cron-tabs"`},
		{in: "crontabs.v1.example.com;status=no", err: `status "no": want on`},
		{in: "crontabs.v1.example.com;status=addresses,False", err: `status "addresses,False": want on`},
		{in: "crontabs.v1.example.com;status=spec.x", err: `status "spec.x": want on`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Parse(%q) = %v, %v; want an error containing %q", c.in, got, err, c.err)
				}
				if !strings.Contains(err.Error(), c.in) {
					t.Errorf("the error %q does not quote the value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got.Labels != nil) != (got.Selector != "") {
				t.Errorf("Labels %v for selector %q", got.Labels, got.Selector)
			}
			got.Labels = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse(%q) =\n %#v\nwant\n %#v", c.in, got, c.want)
			}
			// String gives the value back, and parses to the same resource.
			again, err := Parse(got.String())
			if err != nil {
				t.Fatalf("Parse(String()=%q): %v", got.String(), err)
			}
			again.Labels = nil
			if !reflect.DeepEqual(again, got) {
				t.Errorf("Parse(%q) = %#v, want %#v", got.String(), again, got)
			}
		})
	}
}

func TestSelectorMatches(t *testing.T) {
	r, err := Parse("ingresses.v1.networking.k8s.io;selector=team=a,tier!=db")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"team": "a"}, true},
		{map[string]string{"team": "a", "tier": "db"}, false},
		{map[string]string{"team": "b"}, false},
	} {
		if got := r.Labels.Matches(labels.Set(c.labels)); got != c.want {
			t.Errorf("%v: matches %v, want %v", c.labels, got, c.want)
		}
	}
}

func TestNameAndQualified(t *testing.T) {
	for _, c := range []struct{ in, name, qualified, apiVersion string }{
		{"ingresses.v1.networking.k8s.io", "ingresses", "ingresses.v1.networking.k8s.io", "networking.k8s.io/v1"},
		{"nodes.v1", "nodes", "nodes.v1", "v1"},
		{"events.v1.events.k8s.io;as=new_events", "new_events", "events.v1.events.k8s.io", "events.k8s.io/v1"},
	} {
		r, err := Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != c.name || r.Qualified() != c.qualified || r.GroupVersion().String() != c.apiVersion {
			t.Errorf("%s: name %q qualified %q apiVersion %q; want %q %q %q", c.in, r.Name(), r.Qualified(), r.GroupVersion(), c.name, c.qualified, c.apiVersion)
		}
	}
}

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"nodes.v1", []string{"nodes.v1"}},
		{"ingresses.v1.networking.k8s.io,nodes.v1", []string{"ingresses.v1.networking.k8s.io", "nodes.v1"}},
		{"ingresses.v1.networking.k8s.io, nodes.v1 ", []string{"ingresses.v1.networking.k8s.io", "nodes.v1"}},
		// A selector's commas stay with it.
		{"ingresses.v1.networking.k8s.io;selector=team=a,tier!=db,nodes.v1",
			[]string{"ingresses.v1.networking.k8s.io;selector=team=a,tier!=db", "nodes.v1"}},
		{"pods.v1;selector=app in (web,api),app.kubernetes.io/name,nodes.v1;selector=a,b",
			[]string{"pods.v1;selector=app in (web,api),app.kubernetes.io/name", "nodes.v1;selector=a,b"}},
		{"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name,nodes.v1;as=n",
			[]string{"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name", "nodes.v1;as=n"}},
		// So do the status fields'.
		{"gateways.v1.gateway.networking.k8s.io;status=addresses,conditions,nodes.v1",
			[]string{"gateways.v1.gateway.networking.k8s.io;status=addresses,conditions", "nodes.v1"}},
	}
	for _, c := range cases {
		if got := Split(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestListFlag(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var l List
	fs.Var(&l, "watch", "")
	err := fs.Parse([]string{
		"--watch", "ingresses.v1.networking.k8s.io;selector=a=b,c!=d",
		"--watch", "endpointslices.v1.discovery.k8s.io,nodes.v1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.Names(), " "); got != "ingresses endpointslices nodes" {
		t.Errorf("names %q", got)
	}
	if l[0].Selector != "a=b,c!=d" {
		t.Errorf("selector %q", l[0].Selector)
	}

	t.Run("one plural in two groups needs as", func(t *testing.T) {
		var l List
		if err := l.Set("events.v1"); err != nil {
			t.Fatal(err)
		}
		err := l.Set("events.v1.events.k8s.io")
		if err == nil || !strings.Contains(err.Error(), "both resources.events") || !strings.Contains(err.Error(), ";as=NAME") {
			t.Fatalf("err = %v", err)
		}
		if len(l) != 1 {
			t.Errorf("a refused value was added: %v", l.Names())
		}
		if err := l.Set("events.v1.events.k8s.io;as=new_events"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(l.Names(), " "); got != "events new_events" {
			t.Errorf("names %q", got)
		}
	})
	t.Run("String gives back what parses to the same list", func(t *testing.T) {
		var again List
		if err := again.Set(l.String()); err != nil {
			t.Fatal(err)
		}
		if again.String() != l.String() {
			t.Errorf("%q != %q", again.String(), l.String())
		}
	})
}

func TestStatusTrimLeavesWhatTemplatesSee(t *testing.T) {
	obj := func() map[string]any {
		return map[string]any{"spec": map[string]any{"x": 1}, "status": map[string]any{
			"addresses": []any{"10.0.0.1"}, "conditions": []any{"Programmed"}, "listeners": []any{"http"}}}
	}
	cases := []struct {
		name   string
		status Status
		want   map[string]any // the status left; nil: none
	}{
		{"on", Status{}, obj()["status"].(map[string]any)},
		{"off", Status{Off: true}, nil},
		{"one field", Status{Fields: []string{"addresses"}}, map[string]any{"addresses": []any{"10.0.0.1"}}},
		{"two fields", Status{Fields: []string{"conditions", "addresses"}},
			map[string]any{"addresses": []any{"10.0.0.1"}, "conditions": []any{"Programmed"}}},
		{"a field it has not", Status{Fields: []string{"observedGeneration"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := obj()
			c.status.Trim(o)
			got, has := o["status"]
			if c.want == nil {
				if has {
					t.Fatalf("status left: %v", got)
				}
			} else if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("status = %v, want %v", got, c.want)
			}
			if !reflect.DeepEqual(o["spec"], map[string]any{"x": 1}) {
				t.Errorf("spec changed: %v", o["spec"])
			}
		})
	}
}

func TestStatusUnionIsWhatEitherSees(t *testing.T) {
	off, all := Status{Off: true}, Status{}
	a, b := Status{Fields: []string{"addresses"}}, Status{Fields: []string{"conditions", "addresses"}}
	cases := []struct {
		name       string
		s, t, want Status
	}{
		{"off and off", off, off, off},
		{"off and fields", off, a, a},
		{"fields and off", a, off, a},
		{"fields and all", a, all, all},
		{"fields and fields", a, b, Status{Fields: []string{"addresses", "conditions"}}},
	}
	for _, c := range cases {
		if got := c.s.Union(c.t); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v.Union(%v) = %#v, want %#v", c.name, c.s, c.t, got, c.want)
		}
	}
}
