package render

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja"
	"github.com/haproxy-sidecar/haproxy-sidecar/templates"
)

// servicesAsMaps is testServices as the snapshot gave them before they were records: each a
// Go map, its selector and other maps Go maps too, its pods a record of records.
func servicesAsMaps() []map[string]any {
	var shapes record.Shapes
	services := testServices()
	for _, svc := range services {
		pods := maps.Clone(svc["pods"].(map[string]any))
		for name, p := range pods {
			pods[name] = record.Of(&shapes, p)
		}
		svc["pods"] = record.FromMap(nil, pods)
	}
	services[2]["extra"] = map[string]any{"notes": []any{"a", map[string]any{"deep": int64(1), "list": []any{}}}, "empty": map[string]any{}, "null": nil,
		"odd": map[string]any{"é": int64(1), "Z": 2.5, "a b": true, `"q`: "x", "": "empty", "z": nil}}
	return services
}

// TestServiceRecordsRenderLikeMaps: the services as records (Snapshot.Services, as the
// renderer gives them to templates) render exactly as the Go maps they were, for each way a
// template can read or try to change a dict: the default template, reads, iteration, printing,
// comparison, filters and tests, and the errors of changing data. Each is rendered twice with
// a shared cache (kept answers) and once afresh.
func TestServiceRecordsRenderLikeMaps(t *testing.T) {
	probes := map[string]string{
		"printed":        `{% for s in services %}{{ s }}|{{ s|string }}|{{ s ~ "" }}|{{ s.selector }}|{{ s.extra }}{% endfor %}`,
		"tojson":         `{{ services|tojson }}|{{ services[2]|tojson(indent=2) }}|{{ services[0].selector|tojson }}`,
		"pprint":         `{{ services[2]|pprint }}|{{ services[0].selector|pprint }}`,
		"iteration":      `{% for k in services[0] %}{{ k }},{% endfor %}{% for k, v in services[1].items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in services[2] %}{{ k }}{% endfor %}`,
		"views":          `{{ services[0].keys()|list }} {{ services[0].values()|list|length }} {{ services[0].items()|list|length }} {{ services[0]|list }} {{ services[0].selector|list }}`,
		"get":            `{{ services[0].get("path") }} {{ services[0].get("nope", 1) }} {{ services[0].get("nope") }} {{ services[0].selector.get("app") }} {{ services[0]["name"] }} {{ services[0]["selector"]["app"] }} {{ services[0].has_key("ssl") }}`,
		"in":             `{{ "path" in services[0] }} {{ "app" in services[0].selector }} {{ "x" in services[0] }} {{ "api.example.com" in services[0].hostnames }} {{ services[0] in services }}`,
		"equality":       `{{ services[0] == services[0] }} {{ services[0].selector == {"app": "api"} }} {{ services[0] == services[1] }} {{ services[0].selector == services[1].selector }} {{ services[0] != {} }} {{ services[2].extra.empty == {} }}`,
		"length":         `{{ services|length }} {{ services[0]|length }} {{ services[0].selector|count }} {{ services[2].extra.empty|length }}`,
		"truth":          `{% if services[2].extra.empty %}full{% else %}empty{% endif %} {% if services[0].selector %}sel{% endif %} {{ services[2].extra.null is none }}`,
		"tests":          `{{ services[0] is mapping }} {{ services is sequence }} {{ services[0].selector is mapping }} {{ services[0] is sameas services[0] }} {{ services[0] is iterable }} {{ services[0].hostnames is sequence }}`,
		"missing":        `{{ services[0].nope }}|{{ services[0].nope is defined }}|{{ services[0].selector.nope is undefined }}`,
		"missing deeper": `{{ services[0].nope.x }}`,
		"dictsort":       `{{ services[0].selector|dictsort }} {{ services[2].extra|dictsort|length }} {{ services[0]|dictsort|map("first")|join(",") }}`,
		"filters":        `{{ services|selectattr("ssl")|map(attribute="name")|join(",") }} {{ services|rejectattr("path")|map(attribute="name")|list }} {{ services|map(attribute="selector.app")|list }} {{ services|sort(attribute="name", reverse=true)|map(attribute="name")|join }} {{ services|groupby("namespace")|map("first")|list }} {{ services|selectattr("selector.app", "equalto", "shop")|first|attr("name") }}`,
		"format":         `{{ "%(name)s/%(namespace)s" % services[0] }} {{ "%s" % services[0].selector }} {{ "{}".format(services[0].selector) }}`,
		"copies":         `{% set d = dict(services[0]) %}{% do d.update({"name": "x"}) %}{{ d.name }} {{ services[0].name }} {% set c = services[0].selector.copy() %}{% do c.update({"b": 1}) %}{{ c }} {{ services[0].selector }} {% set l = services[0].ports|list %}{% do l.append(1) %}{{ l }} {{ services[0].ports }}`,
		"nested":         `{{ services[2].extra.notes[1].deep }} {{ services[2].extra.notes[1]["list"] }} {{ services[2].extra.notes|last }} {% for k, v in services[2].extra.notes[1].items() %}{{ k }}:{{ v }} {% endfor %}`,
		"slices":         `{{ services[:2]|map(attribute="name")|list }} {{ services[-1].name }} {{ (services|first).name }} {{ services[0].hostnames + ["x"] }}`,
		"pongo2 filter":  `{{ services[0].selector|length_is(1) }}`,
		"namespace":      `{% set ns = namespace(n=services[0].selector|length) %}{{ ns.n }}`,
		"attr":           `{{ services[0]|attr("name") }} {{ services[0]|attr("items") is defined }}`,
		"unique":         `{{ services|map(attribute="namespace")|unique|list }} {{ services|map(attribute="selector")|list|length }}`,
		"bound method":   `{{ services[0].items is callable }}`,
		"odd keys":       `{{ services[2].extra.odd }}|{{ services[2].extra.odd|tojson }}|{{ services[2].extra.odd|pprint }}|{{ services[2].extra.odd|dictsort }}|{% for k, v in services[2].extra.odd.items() %}{{ k }}={{ v }};{% endfor %}|{{ services[2].extra.odd[""] }}`,
	}
	for _, m := range []string{`update({"a": 1})`, `selector.update({})`, `ports.append(1)`, `pop("name")`, `setdefault("x", 1)`, `clear()`, `popitem()`, `hostnames.extend([1])`, `selector.pop("app")`} {
		probes["change "+m] = fmt.Sprintf(`{%% do services[0].%s %%}`, m)
	}
	probes["change the list"] = `{% do services.append(1) %}`
	probes["change by set"] = `{% set s = services[0] %}{% set s.name = "x" %}`
	for name, tpl := range probes {
		t.Run(name, func(t *testing.T) {
			compareServiceForms(t, map[string]string{"t": tpl}, "t")
		})
	}
	t.Run("default template", func(t *testing.T) {
		compareServiceForms(t, templates.Default, templates.DefaultKey)
	})
}

// compareServiceForms renders srcs with the services as maps and as records (each twice with a
// shared cache, and afresh) and fails when any output or error differs.
func compareServiceForms(t *testing.T, srcs map[string]string, key string) {
	t.Helper()
	p, err := jinja.Compile(srcs, key, jinja.Options{Filters: extraFilters()})
	if err != nil {
		t.Fatal(err)
	}
	s := testSnapshot(nil, "")
	s.Services = serviceRecords(servicesAsMaps())
	asRecords := New(Options{SSLDir: "/ssl"}).context(s, []string{"example"})
	asMaps := maps.Clone(asRecords)
	asMaps["services"] = servicesAsMaps()
	render := func(vars map[string]any) []string {
		var cache jinja.ModuleCache
		var outs []string
		for range 2 {
			out, err := p.RenderSharing(context.Background(), vars, jinja.Limits{}, nil, &jinja.Modules{Across: &cache}, false)
			cache.Sweep()
			outs = append(outs, fmt.Sprintf("%q %v", out.Bytes, err))
		}
		out, err := p.Render(context.Background(), vars, jinja.Limits{}, nil)
		return append(outs, fmt.Sprintf("%q %v", out, err))
	}
	want, got := render(asMaps), render(asRecords)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("render %d with records:\n%s\nwith maps:\n%s", i, got[i], want[i])
		}
	}
	if want[0] == `"" <nil>` {
		t.Error("rendered nothing")
	}
}
