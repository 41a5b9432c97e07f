package jinja

import (
	"slices"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// What a module imported in a loop reads of a name it uses only as name.a.b...: those
// chains, a prefix of another standing for both; any other use of the name, or a chain on
// a method name, reads it whole (or the chain before the method).
func TestFreeReadsChains(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ r.metadata.name }}{{ r.spec.rules }}{{ r.spec.rules[0].x }}{{ r.metadata.name }}`, "r.metadata.name r.spec.rules"},
		{`{{ r.a.b }}{{ r.a }}{{ r.a.c }}`, "r.a"},
		{`{{ r.a.b.items() }}{{ r.c.append(1) }}{{ r.d.name.upper() }}{{ r.e.get.f }}`, "r.a.b r.c r.d.name r.e"},
		{`{{ r.a }}{{ x }}{{ y.c }}{% set y = r.b %}{{ y.d }}`, "r.a r.b x y.c"},
		// Bound where it is read: nothing of the importer's.
		{`{% for r in xs %}{{ r.a }}{% endfor %}{% macro m(r) %}{{ r.b }}{% endmacro %}{% with r = 1 %}{{ r.c }}{% endwith %}`, "xs"},
		// Any other use: whole.
		{`{{ r.a }}{{ r }}`, "r"},
		{`{{ r.a }}{{ r|length }}`, "r"},
		{`{{ r.a }}{{ r is defined }}`, "r"},
		{`{{ r.a }}{% set x = r %}`, "r"},
		{`{{ r.a }}{% for x in r %}{% endfor %}`, "r"},
		{`{{ r.a }}{{ r == 1 }}`, "r"},
		{`{{ r.a }}{{ r.get("a") }}`, "r"},
		{`{{ r.a }}{{ r.items() }}`, "r"},
		{`{{ r.a }}{{ r.keys }}`, "r"},
		{`{% macro m(x) %}{% endmacro %}{{ r.a }}{{ m(r) }}`, "r"},
		{`{{ r.a }}{{ r["a"] }}`, "r"},
		{`{{ r.a }}{% set r.b = 1 %}`, "r"},
		{`{{ r.a }}{{ (r).b }}{{ [r][0].c }}`, "r"},
	} {
		tree, err := parse.Parse(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		fi := freeNames(tree)
		if got := readNames(fi); got != c.want {
			t.Errorf("%s: reads %q, want %q", c.src, got, c.want)
		}
	}
}

// readNames are fi's reads as name.a.b, sorted.
func readNames(fi freeInfo) string {
	var out []string
	if fi.reads == nil {
		out = append(out, fi.names...)
	}
	for _, r := range fi.reads {
		n := strings.Join(append([]string{fi.names[r.name]}, r.chain...), ".")
		if r.keyed {
			n += ".get()"
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// A part that reads its item by attribute chains only is computed again when a chain's value
// changes, and not when another part of the item does (the status and the resourceVersion,
// which the status writer changes); a part that uses the item otherwise reads it whole.
// Each case renders twice with the cache and compares the second render with one afresh.
func TestLoopImportsReadChains(t *testing.T) {
	rec := func(name, port, rv, status string) *record.Record {
		spec := map[string]any{}
		if port != "" {
			spec["port"] = port
		}
		return record.FromMap(nil, map[string]any{"metadata": map[string]any{"name": name, "resourceVersion": rv},
			"spec": spec, "status": map[string]any{"phase": status}})
	}
	base := func() map[string]any {
		return map[string]any{"items": []any{rec("a", "1", "1", "x"), rec("b", "2", "1", "x"), rec("c", "", "1", "x")}, "other": "o"}
	}
	statusWave := func(v map[string]any) {
		v["items"] = []any{rec("a", "1", "2", "y"), rec("b", "2", "2", "y"), rec("c", "", "2", "y")}
	}
	const chains = `{% set lines = [item.metadata.name ~ ":" ~ item.spec.port|default("none")] %}`
	main := `{% set d = {"a": {"b": other}, "n": none} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
	for _, c := range []struct {
		name   string
		part   string
		change func(v map[string]any)
		reused int
	}{
		{"status and resourceVersion", chains, statusWave, 3},
		{"resourceVersion only", chains, func(v map[string]any) {
			v["items"].([]any)[1] = rec("b", "2", "9", "x")
		}, 3},
		{"a port", chains, func(v map[string]any) { v["items"].([]any)[1] = rec("b", "20", "1", "x") }, 2},
		{"a name", chains, func(v map[string]any) { v["items"].([]any)[0] = rec("z", "1", "1", "x") }, 2},
		{"a port removed", chains, func(v map[string]any) { v["items"].([]any)[0] = rec("a", "", "1", "x") }, 2},
		{"a port added where missing", chains, func(v map[string]any) { v["items"].([]any)[2] = rec("c", "3", "1", "x") }, 2},
		{"a method on the chain's end", `{% set lines = [item.spec.items()|list|string] %}`, statusWave, 3},
		{"a method on the chain's end, its value changed", `{% set lines = [item.spec.items()|list|string] %}`,
			func(v map[string]any) { v["items"].([]any)[1] = rec("b", "20", "1", "x") }, 2},
		{"a chain of a dict the template made", `{% set lines = [d.a.b ~ item.metadata.name] %}`, statusWave, 3},
		{"a chain of a dict the template made, changed", `{% set lines = [d.a.b ~ item.metadata.name] %}`,
			func(v map[string]any) { v["other"] = "p" }, 0},
		{"a missing attribute of none", `{% set lines = [d.n.x|default("-") ~ item.metadata.name] %}`, statusWave, 3},
		// A chain on past a missing attribute, or on from a string, is never the same (in a
		// branch not taken: the chains are read all the same).
		{"a missing attribute before the chain's end", `{% if false %}{{ d.m.x.y }}{% endif %}{% set lines = [item.metadata.name] %}`, func(map[string]any) {}, 0},
		{"a step from a string", `{% if false %}{{ item.spec.port.x }}{% endif %}{% set lines = [item.metadata.name] %}`, func(map[string]any) {}, 0},
		// Any other use reads the item whole: the status wave computes every part again.
		{"printed", `{% set lines = [item|string|length > 0] %}`, statusWave, 0},
		{"a filter", `{% set lines = [item|length] %}`, statusWave, 0},
		{"a test", `{% set lines = [item is defined, item.metadata.name] %}`, statusWave, 0},
		{"set to another name", `{% set r = item %}{% set lines = [r.metadata.name] %}`, statusWave, 0},
		{"iterated", `{% set lines = [] %}{% for k in item %}{% do lines.append(k) %}{% endfor %}`, statusWave, 0},
		{"compared", `{% set lines = [item == none, item.metadata.name] %}`, statusWave, 0},
		{"get", `{% set lines = [item.get("metadata").name] %}`, statusWave, 0},
		{"items", `{% set lines = [item.items()|list|length] %}`, statusWave, 0},
		{"a method's name, not called", `{% set lines = [item.values is defined, item.metadata.name] %}`, statusWave, 0},
		{"subscripted", `{% set lines = [item["metadata"]["name"]] %}`, statusWave, 0},
		{"passed to a macro", `{% macro m(x) %}{{ x.metadata.name }}{% endmacro %}{% set lines = [m(item)] %}`, statusWave, 0},
		// A chain through what is not data (the loop object) is never the same.
		{"a chain through the loop object", `{% set lines = [loop.index0 ~ item.metadata.name] %}`, func(map[string]any) {}, 0},
		// A part that changes what it reads through a chain is never kept.
		{"a part that changes a chain's value", `{% do d.a.update({item.metadata.name: 1}) %}{% set lines = [d.a.b] %}`, func(map[string]any) {}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(map[string]string{"part": c.part, "t": main}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, n := reusedAfterChange(t, renderOf(t, p), base, c.change, loopReused)
			if n != c.reused {
				t.Errorf("reused %d imports, want %d (output %q)", n, c.reused, got)
			}
		})
	}
}
