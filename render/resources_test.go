package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/watchspec"
)

// watchedSnapshot is a snapshot with watched Ingresses, EndpointSlices and Nodes, as the
// snapshot package assembles them, and tpl as the template.
func watchedSnapshot(t *testing.T, tpl string, mod func(objs map[string][]map[string]any)) *snapshot.Snapshot {
	t.Helper()
	raw := map[string][]map[string]any{
		"ingresses": {
			{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
				"metadata": map[string]any{"name": "shop", "namespace": "web", "labels": map[string]any{"team": "a"}},
				"spec": map[string]any{"ingressClassName": "haproxy-sidecar", "rules": []any{
					map[string]any{"host": "shop.example.com", "http": map[string]any{"paths": []any{
						map[string]any{"path": "/", "pathType": "Prefix", "backend": map[string]any{
							"service": map[string]any{"name": "shop", "port": map[string]any{"number": int64(80)}}}}}}}}}},
			{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
				"metadata": map[string]any{"name": "api", "namespace": "web"},
				"spec":     map[string]any{"rules": []any{map[string]any{"host": "api.example.com"}}}},
		},
		"endpointslices": {
			{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
				"metadata": map[string]any{"name": "shop-x", "namespace": "web", "labels": map[string]any{"kubernetes.io/service-name": "shop"}},
				"endpoints": []any{
					map[string]any{"addresses": []any{"10.0.0.1"}, "nodeName": "n1", "conditions": map[string]any{"ready": true}},
					map[string]any{"addresses": []any{"10.0.0.2"}, "nodeName": "n2", "conditions": map[string]any{"ready": false}},
				}},
		},
		"nodes": {
			{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"},
				"status": map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": "192.168.0.1"}}}},
			{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n2"},
				"status": map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": "192.168.0.2"}}}},
		},
	}
	if mod != nil {
		mod(raw)
	}
	snap := assembleWatched(t, raw, "ingresses.v1.networking.k8s.io;index=host=field:spec.rules.host",
		"endpointslices.v1.discovery.k8s.io;index=service=label:kubernetes.io/service-name", "nodes.v1")
	snap.Templates = map[string]string{"template": tpl}
	snap.TemplateRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "config"}
	return snap
}

// assembleWatched is the snapshot the snapshot package assembles from the objects of the
// watched resources raw (by resource name) with the --watch specs given.
func assembleWatched(tb testing.TB, raw map[string][]map[string]any, watch ...string) *snapshot.Snapshot {
	tb.Helper()
	var specs watchspec.List
	for _, s := range watch {
		if err := specs.Set(s); err != nil {
			tb.Fatal(err)
		}
	}
	var conv snapshot.ObjectConverter
	objs := &snapshot.Objects{Resources: map[string][]*snapshot.Object{}}
	for name, list := range raw {
		for _, u := range list {
			o, err := conv.FromUnstructured(u)
			if err != nil {
				tb.Fatal(err)
			}
			objs.Resources[name] = append(objs.Resources[name], o)
		}
	}
	snap, err := snapshot.Assemble(objs, snapshot.Options{Resources: specs}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return snap
}

// resourceTemplates read the watched resources every way the README shows.
var resourceTemplates = map[string]string{
	"all, sorted": `{% for ing in resources.ingresses.all %}{{ ing.metadata.namespace }}/{{ ing.metadata.name }} {% endfor %}`,
	"by_name":     `{{ resources.ingresses.by_name["web/shop"].spec.rules[0].host }} {{ resources.nodes.by_name["n2"].status.addresses[0].address }}`,
	"get with a default": `{{ resources.ingresses.by_name.get("web/nope", "none") }} {{ "web/shop" in resources.ingresses.by_name }} ` +
		`{{ resources.endpointslices.by_service.get("web/nope", [])|length }}`,
	"index by label": `{% for s in resources.endpointslices.by_service["web/shop"] %}{% for ep in s.endpoints if ep.conditions.ready %}` +
		`{{ resources.nodes.by_name[ep.nodeName].status.addresses|selectattr("type", "equalto", "InternalIP")|map(attribute="address")|first }}{% endfor %}{% endfor %}`,
	"index by field":  `{{ resources.ingresses.by_host["web/api.example.com"]|map(attribute="metadata.name")|join(",") }}`,
	"lengths":         `{{ resources.ingresses.all|length }} {{ resources.nodes.by_name|length }} {{ resources|length }}`,
	"tojson":          `{{ resources.nodes.by_name["n1"]|tojson }}`,
	"dict of lookups": `{{ resources.ingresses.keys()|sort|join(",") }} {{ resources["endpointslices"]["all"][0]["metadata"]["name"] }}`,
}

func TestWatchedResourcesInTemplates(t *testing.T) {
	want := map[string]string{
		"all, sorted":        "web/api web/shop ",
		"by_name":            "shop.example.com 192.168.0.2",
		"get with a default": "none True 0",
		"index by label":     "192.168.0.1",
		"index by field":     "api",
		"lengths":            "2 2 3",
		"tojson":             `{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"addresses": [{"address": "192.168.0.1", "type": "InternalIP"}]}}`,
		"dict of lookups":    "all,by_host,by_name shop-x",
	}
	r := New(Options{})
	for name, tpl := range resourceTemplates {
		t.Run(name, func(t *testing.T) {
			b, err := r.Render(context.Background(), watchedSnapshot(t, tpl, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(string(b.Config), "\n"); got != want[name] {
				t.Errorf("%s\n got  %q\n want %q", tpl, got, want[name])
			}
		})
	}
	t.Run("no --watch: resources is an empty dict", func(t *testing.T) {
		s := watchedSnapshot(t, `{{ resources|length }} {{ resources.ingresses is defined }}`, nil)
		s.Resources = nil
		b, err := r.Render(context.Background(), s)
		if err != nil || string(b.Config) != "0 False\n" {
			t.Errorf("%q, %v", b.Config, err)
		}
	})
}

// TestWatchedResourcesRenderAsJinja2 renders the same templates with the real Jinja2, given the
// context as JSON: the lookups read the same in both.
func TestWatchedResourcesRenderAsJinja2(t *testing.T) {
	py := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import jinja2").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		if os.Getenv("HAPROXY_SIDECAR_REQUIRE_TESTBINS") != "" {
			t.Fatal("python3 with jinja2 is required")
		}
		t.Skip("python3 with jinja2 is not installed")
	}
	r := New(Options{})
	for name, tpl := range resourceTemplates {
		t.Run(name, func(t *testing.T) {
			s := watchedSnapshot(t, tpl, nil)
			b, err := r.Render(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			resources := map[string]any{}
			for _, res := range s.Resources {
				resources[res.Name] = res.Value
			}
			ctx, err := json.Marshal(map[string]any{"resources": resources})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, "-c", `import sys, json, jinja2
ctx = json.loads(sys.argv[2])
sys.stdout.write(jinja2.Environment().from_string(sys.argv[1]).render(**ctx))`, tpl, string(ctx))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("jinja2: %v\n%s", err, out)
			}
			if got := strings.TrimSuffix(string(b.Config), "\n"); got != string(out) {
				t.Errorf("%s\n engine %q\n jinja2 %q", tpl, got, out)
			}
		})
	}
}

func TestWatchedObjectCannotInjectLines(t *testing.T) {
	t.Run("an annotation", func(t *testing.T) {
		s := watchedSnapshot(t, `{% for ing in resources.ingresses.all %}# {{ ing.metadata.annotations.note }}
{% endfor %}`, func(objs map[string][]map[string]any) {
			objs["ingresses"][0]["metadata"].(map[string]any)["annotations"] = map[string]any{"note": injected}
			objs["ingresses"][1]["metadata"].(map[string]any)["annotations"] = map[string]any{"note": "fine"}
		})
		ie, uv := unsafeErr(t, s)
		want := snapshot.Ref{Kind: "Ingress", Namespace: "web", Name: "shop"}
		if ie.Ref != want || uv.Origin != want || uv.Field != "metadata.annotations.note" {
			t.Errorf("ref %+v origin %+v field %q, want %+v metadata.annotations.note", ie.Ref, uv.Origin, uv.Field, want)
		}
		if !strings.Contains(ie.Error(), "Ingress web/shop") {
			t.Errorf("error %q does not name the object", ie)
		}
	})
	t.Run("a lookup key", func(t *testing.T) {
		s := watchedSnapshot(t, `{% for host in resources.ingresses.by_host %}{{ host }}
{% endfor %}`, func(objs map[string][]map[string]any) {
			objs["ingresses"][1]["spec"] = map[string]any{"rules": []any{map[string]any{"host": "evil\nhost"}}}
		})
		ie, uv := unsafeErr(t, s)
		want := snapshot.Ref{Kind: "Ingress", Namespace: "web", Name: "api"}
		if ie.Ref != want || !strings.Contains(uv.Field, "by_host") {
			t.Errorf("ref %+v field %q, want %+v and the lookup", ie.Ref, uv.Field, want)
		}
	})
}

// TestUnwatchedResourceSaysWhichFlag: a template that reads resources.NAME without --watch
// fails naming the flag that gives it; other undefined attributes say what Jinja2 says.
func TestUnwatchedResourceSaysWhichFlag(t *testing.T) {
	for _, tc := range []struct {
		tpl       string
		resources []snapshot.Resource
		want      []string
	}{
		{"{% for i in resources.ingresses.all %}{% endfor %}", nil,
			[]string{"'dict object' has no attribute 'ingresses'", "none is watched", "add --watch ingresses.v1.networking.k8s.io"}},
		{"{{ resources['widgets'].by_name }}", []snapshot.Resource{{Name: "nodes"}},
			[]string{"has no attribute 'widgets'", "watched: nodes", "add --watch widgets.VERSION.GROUP"}},
	} {
		s := testSnapshot(map[string]string{"template": tc.tpl}, "template")
		s.Resources = tc.resources
		err := renderErr(t, s)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant %q", tc.tpl, err, w)
			}
		}
	}
	err := renderErr(t, testSnapshot(map[string]string{"template": "{{ stats.nope.x }}"}, "template"))
	if strings.Contains(err.Error(), "--watch") {
		t.Errorf("an undefined attribute of another dict: %v", err)
	}
}
