package render

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/snapshot"
)

var servicesRef = snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services"}

const injected = "a.example.com\n    http-request return status 200 content-type text/plain string INJECTED"

// unsafeErr renders s and returns the UnsafeValueError inside the InputError.
func unsafeErr(t *testing.T, s *snapshot.Snapshot) (*snapshot.InputError, *UnsafeValueError) {
	t.Helper()
	ie := renderErr(t, s)
	var uv *UnsafeValueError
	if !errors.As(ie, &uv) {
		t.Fatalf("error %v is not an UnsafeValueError", ie)
	}
	return ie, uv
}

// TestDataCannotInjectLines: a value from the data holding a newline, a carriage return or a
// NUL is a render error when printed, naming the object, key and field it came from and
// where it was printed; the template can mark it |safe.
func TestDataCannotInjectLines(t *testing.T) {
	t.Run("hostname in the default template", func(t *testing.T) {
		s := testSnapshot(nil, "")
		s.ServicesRef = servicesRef
		setField(s, 2, "hostnames", []any{injected, "example.com"})
		ie, uv := unsafeErr(t, s)
		want := servicesRef
		want.Key = "web"
		if ie.Ref != want || uv.Origin != want || uv.Field != "hostnames[0]" {
			t.Errorf("ref %+v origin %+v field %q, want %+v hostnames[0]", ie.Ref, uv.Origin, uv.Field, want)
		}
		if uv.Template.Name != "templates/rules.j2" || uv.Line == 0 || uv.Col == 0 {
			t.Errorf("printed at %+v line %d column %d", uv.Template, uv.Line, uv.Col)
		}
		for _, m := range []string{`ConfigMap lb/services key "web"`, "field hostnames[0]", "a newline", "templates/rules.j2 line", "|safe"} {
			if !strings.Contains(ie.Error(), m) {
				t.Errorf("error %q does not say %q", ie.Error(), m)
			}
		}
	})

	cases := []struct {
		name, tpl    string
		mod          func(s *snapshot.Snapshot)
		origin       snapshot.Ref
		field, value string
	}{
		{"a port", "{% for s in services %}{% for p in s.ports %}server x 1.2.3.4:{{ p }}\n{% endfor %}{% endfor %}",
			func(s *snapshot.Snapshot) { setField(s, 1, "ports", []any{"35461\n  server evil 6.6.6.6:80"}) },
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "shop"}, "ports[0]", "35461\n  server evil 6.6.6.6:80"},
		{"a carriage return through a filter", "{{ services[0].path|upper }}",
			func(s *snapshot.Snapshot) { setField(s, 0, "path", "^/v1/\rx") },
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "api"}, "path", "^/V1/\rX"},
		{"a NUL through concatenation", "{{ 'x' ~ services[0].namespace ~ 'y' }}",
			func(s *snapshot.Snapshot) { setField(s, 0, "namespace", "a\x00b") },
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "api"}, "namespace", "xa\x00by"},
		{"a nested field", "{{ services[2].extra.notes[1] }}",
			func(s *snapshot.Snapshot) {
				setField(s, 2, "extra", map[string]any{"notes": []any{"ok", "two\nlines"}})
			},
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "web"}, "extra.notes[1]", "two\nlines"},
		{"a pod annotation", "{% for s in services %}{% for n, p in s.pods.items() if p.metadata.annotations is defined %}{{ p.metadata.annotations.note }}{% endfor %}{% endfor %}",
			func(s *snapshot.Snapshot) {
				p := pod("shop-1", "10.0.2.11")
				p["metadata"].(map[string]any)["annotations"] = map[string]any{"note": "x\ny"}
				s.Services[1].Field("pods").(map[string]any)["shop-1"] = p
			},
			snapshot.Ref{Kind: "Pod", Namespace: "web", Name: "shop-1"}, "metadata.annotations.note", "x\ny"},
		{"a pod as a record", "{% for s in services %}{% for n, p in s.pods.items() %}{{ p.status.podIP }}{% endfor %}{% endfor %}",
			func(s *snapshot.Snapshot) {
				s.Services = asRecords(s.Services)
				var shapes record.Shapes
				setField(s, 2, "pods", record.FromMap(nil, map[string]any{"web-0": record.Of(&shapes, pod("web-0", "fd00::10\n"))}))
			},
			snapshot.Ref{Kind: "Pod", Namespace: "web", Name: "web-0"}, "status.podIP", "fd00::10\n"},
		{"an environment variable", "bind {{ env.HTTP_BIND }}",
			func(s *snapshot.Snapshot) { s.Env["HTTP_BIND"] = ":80\nlisten evil" },
			snapshot.Ref{Kind: "Env", Name: "HTTP_BIND"}, "env.HTTP_BIND", ":80\nlisten evil"},
		{"through a macro argument", "{% macro m(h) %}host {{ h }}{% endmacro %}{{ m(services[2].hostnames[0]) }}",
			func(s *snapshot.Snapshot) { setField(s, 2, "hostnames", []any{injected}) },
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "web"}, "hostnames[0]", injected},
		{"joined with template text", "{{ services[2].hostnames|join(' ') }}",
			func(s *snapshot.Snapshot) { setField(s, 2, "hostnames", []any{"a", injected}) },
			snapshot.Ref{Kind: "ConfigMap", Namespace: "lb", Name: "services", Key: "web"}, "hostnames[1]", "a " + injected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(map[string]string{"template": tc.tpl}, "template")
			s.ServicesRef = servicesRef
			tc.mod(s)
			ie, uv := unsafeErr(t, s)
			if ie.Ref != tc.origin || uv.Origin != tc.origin || uv.Field != tc.field || uv.Value != tc.value {
				t.Errorf("ref %+v origin %+v field %q value %q,\nwant %+v %q %q", ie.Ref, uv.Origin, uv.Field, uv.Value, tc.origin, tc.field, tc.value)
			}
			if uv.Template != configRefKey("template") || uv.Line != 1 {
				t.Errorf("printed at %+v line %d", uv.Template, uv.Line)
			}
		})
	}

	t.Run("marked safe, it prints", func(t *testing.T) {
		s := testSnapshot(map[string]string{"template": "{% for h in services[2].hostnames %}{{ h|safe }}{% endfor %}"}, "template")
		setField(s, 2, "hostnames", []any{injected})
		b, err := New(Options{}).Render(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b.Config), "string INJECTED") {
			t.Errorf("got %q", b.Config)
		}
	})
	t.Run("removed by the template, it prints", func(t *testing.T) {
		s := testSnapshot(map[string]string{"template": "{{ services[2].hostnames[0]|replace('\\n', ' ') }}|{{ services[2].hostnames }}|{{ services[2]|tojson|length > 0 }}"}, "template")
		setField(s, 2, "hostnames", []any{injected})
		b, err := New(Options{}).Render(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(b.Config), "\n") != 1 {
			t.Errorf("got %q", b.Config)
		}
	})
}

func configRefKey(key string) snapshot.Ref {
	r := configRef
	r.Key = key
	return r
}

// TestTemplateNewlinesNeedNoSafe: newlines the template writes itself print as they are:
// text, string literals, and what macros, call blocks, set and filter blocks and includes
// produce from clean data.
func TestTemplateNewlinesNeedNoSafe(t *testing.T) {
	tpls := map[string]string{
		"template": `{{ services[0].hostnames|join('\n    ') }}
{{ "a\nb" }}
{% macro lines(items) %}{% for i in items %}{{ i }}
{% endfor %}{% endmacro %}{{ lines(services|map(attribute='name')) }}
{%- macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}x
y{% endcall %}
{% set block %}one
two{% endset %}{{ block }}
{% filter upper %}three
four{% endfilter %}
{% include 'part' %}
{{ ('x' ~ '\n' ~ services[1].name)|upper }}`,
		"part": "five\n{{ services[2].name }}",
	}
	want := "api.example.com\n    ^(www\\.)?api\\.example\\.org$\na\nb\napi\nshop\nweb\n<x\ny>\none\ntwo\nTHREE\nFOUR\nfive\nweb\nX\nSHOP\n"
	if got := renderTplSet(t, tpls, "template"); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
