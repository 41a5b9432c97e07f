package render

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// asRecords is testSnapshot's services with their pods as the sidecar's snapshot has them:
// each service's pods a record of records.
func asRecords(services []*record.Record) []*record.Record {
	var shapes record.Shapes
	for i, svc := range services {
		pods := maps.Clone(svc.Field("pods").(map[string]any))
		for name, p := range pods {
			pods[name] = record.Of(&shapes, p)
		}
		services[i] = withPods(svc, record.FromMap(nil, pods))
	}
	return services
}

// TestRecordsRenderLikeMaps: every way a template can read a dict gives the same output
// whether the pods are Go maps or records.
func TestRecordsRenderLikeMaps(t *testing.T) {
	const svc = `{% set s = services[0] %}{% set p = s.pods["api-a"] %}`
	templates := map[string]string{
		"items":               `{% for name, pod in s.pods.items() %}{{ loop.index }}:{{ name }}={{ pod.status.podIP }} {% endfor %}`,
		"direct loop":         `{% for name in s.pods %}{{ name }} {% endfor %}{% for k, v in p.metadata.labels %}{{ k }}={{ v }} {% endfor %}`,
		"keys and values":     `{{ s.pods.keys()|list }} {{ s.pods.values()|map(attribute="metadata.name")|join(",") }}`,
		"length":              `{{ s.pods|length }} {{ p.metadata.labels|count }} {{ p.status|length }}`,
		"index and get":       `{{ s.pods["api-b"].status.podIP }} {{ s.pods.get("nope", "default") }} {{ s.pods.get("api-c").metadata.name }} {{ s.pods["nope"] is undefined }}`,
		"in":                  `{{ "api-a" in s.pods }} {{ "nope" in s.pods }} {{ "app" in p.metadata.labels }} {{ s.pods.has_key("api-d") }}`,
		"nested lists":        `{{ p.spec.containers[0].ports[0].containerPort }} {{ p.spec.containers|first|attr("name") }} {{ (p.spec.containers|first).name }}`,
		"truth":               `{% if p.status %}status{% endif %}{% if not p.nothing %} no-nothing{% endif %}{{ p.metadata.labels and "labels" }}`,
		"printed":             `{{ p.metadata.labels }} {{ p.spec.containers }} {{ p.metadata.labels|string }} {{ s.pods.items()|list|length }}`,
		"tojson":              `{{ p|tojson }} {{ p.metadata.labels|tojson(indent=2) }}`,
		"dictsort":            `{{ p.metadata.labels|dictsort }} {{ p.metadata.labels|dictsort(reverse=true)|first }}`,
		"select and sort":     `{{ s.pods.values()|selectattr("status.podIP", "equalto", "10.0.1.2")|map(attribute="metadata.name")|list }} {{ s.pods.values()|sort(attribute="status.podIP", reverse=true)|map(attribute="metadata.name")|join(",") }}`,
		"equality":            `{{ p.metadata.labels == {"app": "x", "tier": "web"} }} {{ p.metadata.labels == {"app": "x"} }} {{ p.status == s.pods["api-a"].status }}`,
		"tests":               `{{ p is mapping }} {{ p.metadata.labels is iterable }} {{ s.pods is sequence }}`,
		"format":              `{{ "%(app)s/%(tier)s" % p.metadata.labels }} {{ "%s" % p.status.phase }}`,
		"pongo2 filter":       `{{ p.metadata.labels|length_is(2) }}`,
		"unpack":              `{% for pair in p.metadata.labels.items() %}{% set k, v = pair %}{{ k }}{{ v }}{% endfor %}`,
		"attr is not a key":   `{{ p|attr("status") }}|`,
		"namespace from dict": `{% set ns = namespace(n=p.metadata.labels|length) %}{{ ns.n }}`,
	}
	for name, body := range templates {
		t.Run(name, func(t *testing.T) {
			tpl := map[string]string{"template": svc + body}
			maps := testSnapshot(tpl, "template")
			recs := testSnapshot(tpl, "template")
			recs.Services = asRecords(recs.Services)
			r := New(Options{SSLDir: "/ssl"})
			want, err := r.Render(context.Background(), maps)
			if err != nil {
				t.Fatalf("with maps: %v", err)
			}
			got, err := r.Render(context.Background(), recs)
			if err != nil {
				t.Fatalf("with records: %v", err)
			}
			if string(got.Config) != string(want.Config) {
				t.Errorf("with records:\n%s\nwith maps:\n%s", got.Config, want.Config)
			}
			if len(want.Config) == 0 {
				t.Error("rendered nothing")
			}
		})
	}
}

// TestIncludeWritesWhereItIs: an included template's output goes where the include is, also
// inside blocks that capture their output.
func TestIncludeWritesWhereItIs(t *testing.T) {
	tpls := map[string]string{
		"p": "<{{ who }}>{% include 'q' %}",
		"q": "[q]",
	}
	cases := map[string]string{
		"{% set who = 'a' %}1{% include 'p' %}2":                                            "1<a>[q]2",
		"{% set who = 'b' %}{% set x %}{% include 'p' %}{% endset %}({{ x|upper }})":        "(<B>[Q])",
		"{% set who = 'c' %}{% filter upper %}{% include 'p' %}{% endfilter %}!":            "<C>[Q]!",
		"{% macro m(who) %}{% include 'p' %}{% endmacro %}{{ m('d') }}|{{ m('e')|length }}": "<d>[q]|6",
		"{% for who in ['f', 'g'] %}{% include 'p' %}{% endfor %}":                          "<f>[q]<g>[q]",
	}
	for tpl, want := range cases {
		set := map[string]string{"template": tpl}
		for k, v := range tpls {
			set[k] = v
		}
		if got := renderTplSet(t, set, "template"); got != want+"\n" {
			t.Errorf("%s\ngot  %q\nwant %q", tpl, got, want+"\n")
		}
	}
}

// TestForDictPairsWhateverThePodNames: {% for name, pod in service.pods %} gives names and
// pods whatever the names are (Jinja2 would unpack each name's characters, which works only
// while every name has two): a template that served pods a and b keeps working when the only
// pod is b2, with pods as maps and as records (docs/templates.md, deliberate differences).
func TestForDictPairsWhateverThePodNames(t *testing.T) {
	const tpl = `{% for name, pod in services[0].pods %}{{ name }}={{ pod.status.podIP }} {% endfor %}`
	for _, names := range [][]string{{"a", "b"}, {"b2"}, {"ab", "cd"}, {"abc"}} {
		for _, records := range []bool{false, true} {
			s := testSnapshot(map[string]string{"template": tpl}, "template")
			pods := map[string]any{}
			want := ""
			for i, n := range names {
				ip := "10.0.0." + string(rune('1'+i))
				pods[n] = pod(n, ip)
				want += n + "=" + ip + " "
			}
			setField(s, 0, "pods", pods)
			if records {
				s.Services = asRecords(s.Services)
			}
			out, err := New(Options{}).Render(context.Background(), s)
			if err != nil {
				t.Errorf("pods %v (records %v): %v", names, records, err)
				continue
			}
			if got := strings.TrimSuffix(string(out.Config), "\n"); got != want {
				t.Errorf("pods %v (records %v): got %q, want %q", names, records, got, want)
			}
		}
	}
}
