package jinja

import (
	"context"
	"fmt"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A loop body that uses a chain X of the data only as X.get(KEY) reads X by key: its kept
// iteration serves while X gives the same for the keys it looked up, whatever else of X
// changed; anything that makes the lookups uncertain (X used otherwise, a key that is not a
// plain string or number, a macro of the template) reads X whole or never keeps. Each case
// renders twice with the cache and compares both renders with ones computed afresh.
func TestLoopBodiesReadKeys(t *testing.T) {
	item := func(name string, pods ...any) map[string]any {
		return map[string]any{"name": name, "pods": pods}
	}
	base := func() map[string]any {
		return map[string]any{
			"items": []any{item("a", "p1", "p2"), item("b", "p3"), item("c", "p4", "p5")},
			"res": map[string]any{"svcs": map[string]any{"by": map[string]any{
				"a": map[string]any{"port": 1}, "b": map[string]any{"port": 2}, "c": map[string]any{"port": 3},
				"x": map[string]any{"port": 9}}}},
			"pods":  map[string]any{"p1": "10.0.0.1", "p2": "10.0.0.2", "p3": "10.0.0.3", "p4": "10.0.0.4"},
			"other": "o",
		}
	}
	by := func(v map[string]any) map[string]any {
		return v["res"].(map[string]any)["svcs"].(map[string]any)["by"].(map[string]any)
	}
	same := func(map[string]any) {}
	otherKey := func(v map[string]any) { by(v)["x"] = map[string]any{"port": 10} }
	keyChanged := func(v map[string]any) { by(v)["b"] = map[string]any{"port": 20} }
	keyGone := func(v map[string]any) { delete(by(v), "a") }
	keyed := `{% for s in items %}{{ s.name }}:{{ res.svcs.by.get(s.name, {}).port }};{% endfor %}`
	inner := `{% for s in items %}{{ s.name }}{% for p in s.pods %},{{ pods.get(p) }}{% endfor %};{% endfor %}`
	for _, c := range []struct {
		name   string
		t      string
		change func(v map[string]any)
		reused int
	}{
		{"nothing changed", keyed, same, 3},
		{"another key changed", keyed, otherKey, 3},
		{"a key added that no body looked up", keyed, func(v map[string]any) { by(v)["y"] = 1 }, 3},
		{"a looked-up key's value changed", keyed, keyChanged, 2},
		{"a looked-up key gone", keyed, keyGone, 2},
		{"a looked-up key appears", `{% for s in items %}{{ res.svcs.by.get(s.name ~ "2") }};{% endfor %}`,
			func(v map[string]any) { by(v)["b2"] = "new" }, 2},
		{"the key the body computes changed", keyed, func(v map[string]any) { v["items"].([]any)[1] = item("x") }, 2},
		{"a whole dict changed, the looked-up keys the same", keyed, func(v map[string]any) {
			v["res"] = map[string]any{"svcs": map[string]any{"by": map[string]any{
				"a": map[string]any{"port": 1}, "b": map[string]any{"port": 2}, "c": map[string]any{"port": 3}}}}
		}, 3},
		{"the chain's object emptied", keyed, func(v map[string]any) { v["res"] = map[string]any{"svcs": map[string]any{"by": map[string]any{}}} }, 0},
		{"the name gone", `{% for s in items %}{{ s.name }}:{{ (res.svcs.by.get(s.name) if res is defined) }};{% endfor %}`,
			func(v map[string]any) { delete(v, "res") }, 0},
		{"the chain also used whole", `{% for s in items %}{{ res.svcs.by.get(s.name) }}{{ res.svcs.by|length }};{% endfor %}`, otherKey, 0},
		{"the chain also read deeper", `{% for s in items %}{{ res.svcs.by.get(s.name) }}{{ res.svcs.by.x.port }};{% endfor %}`, otherKey, 0},
		{"two keyed chains of one name", `{% for s in items %}{{ res.svcs.by.get(s.name) }}{{ pods.get(s.pods[0]) }};{% endfor %}`, otherKey, 3},
		{"the loop variable looked up: read whole", `{% for s in items %}{{ s.get("name") }};{% endfor %}`,
			func(v map[string]any) { v["items"].([]any)[1].(map[string]any)["pods"] = []any{"p9"} }, 2},
		{"a tuple key", `{% for s in items %}{{ res.svcs.by.get((s.name,)) }};{% endfor %}`, same, 0},
		{"a bool key", `{% for s in items %}{{ res.svcs.by.get(s.name == "a") }};{% endfor %}`, same, 0},
		{"a keyword argument", `{% for s in items %}{{ res.svcs.by.get(s.name, default=1) }};{% endfor %}`, otherKey, 0},
		{"a nested loop's lookups, another key changed", inner, func(v map[string]any) { v["pods"].(map[string]any)["p9"] = "x" }, 3},
		{"a nested loop's lookups, one changed", inner, func(v map[string]any) { v["pods"].(map[string]any)["p5"] = "10.0.0.5" }, 2},
		{"a macro defined in the body", `{% for s in items %}{% macro m() %}{{ res.svcs.by.get(s.name) }}{% endmacro %}{{ m() }};{% endfor %}`, keyChanged, 2},
		{"a macro of the template", `{% macro m(s) %}{{ res.svcs.by.get(s.name) }}{% endmacro %}{% for s in items %}{{ m(s) }};{% endfor %}`, same, 0},
		{"a call block", `{% macro w() %}[{{ caller() }}]{% endmacro %}{% for s in items %}{% call w() %}{{ res.svcs.by.get(s.name) }}{% endcall %}{% endfor %}`, same, 0},
		{"a name rebound in an if", `{% for s in items %}{% if s.name == "b" %}{% set res = {"svcs": {"by": {"b": other}}} %}{% endif %}{{ res.svcs.by.get(s.name) }};{% endfor %}`, otherKey, 2},
		{"a dict the template made, looked up", `{% set d = {"a": other, "b": 2} %}{% for s in items %}{{ d.get(s.name) }};{% endfor %}`,
			func(v map[string]any) { v["other"] = "p" }, 2},
		{"a looked-up list the body changes", `{% set d = {"a": [0], "b": [0]} %}{% for s in items %}{% do (d.get(s.name) or []).append(1) %}{{ d.get(s.name) }};{% endfor %}`, same, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(map[string]string{"t": c.t}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			render := func(vars map[string]any, mods *Modules) string {
				res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%s", res.Bytes)
			}
			got, n := reusedAfterChange(t, render, base, c.change, bodiesReused)
			if n != c.reused {
				t.Errorf("reused %d iterations, want %d (output %q)", n, c.reused, got)
			}
		})
	}
}

// What a body reads by key: its names, and the keyed reads among its reads.
func TestBodyReadsKeyed(t *testing.T) {
	for _, c := range []struct {
		src   string
		keyed int // keyed reads
	}{
		{`{% for s in items %}{{ r.a.get(s) }}{{ r.b.get(s, 1) }}{% endfor %}`, 2},
		{`{% for s in items %}{{ r.a.get(s) }}{{ r.a }}{% endfor %}`, 0},
		{`{% for s in items %}{{ r.a.get(s) }}{{ r.a.b.get(s) }}{% endfor %}`, 0},
		{`{% for s in items %}{{ r.a.get(s) }}{{ r.c.d }}{% endfor %}`, 0},
		{`{% for s in items %}{% for r in s %}{{ r.a.get(s) }}{% endfor %}{% endfor %}`, 0},
		{`{% for s in items %}{{ r.get(s) }}{{ s.get(1) }}{% endfor %}`, 1},
		{`{% for s in items %}{{ r.a.get(s, x=1) }}{% endfor %}`, 0},
		{`{% for s in items %}{{ s.get(1) }}{{ s.a.get(1) }}{% endfor %}`, 0}, // the loop's variable: whole
		{`{% for k, s in items %}{{ s.get(1) }}{{ r.get(k) }}{% endfor %}`, 1},
	} {
		p, err := Compile(map[string]string{"t": c.src}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		loop := p.templates["t"].tree.Body[0].(*parse.ForStmt)
		info := bodyReads(loop)
		n := 0
		for _, r := range info.reads {
			if r.keyed {
				n++
			}
		}
		if !info.ok || n != c.keyed || n > 0 && len(info.sites) == 0 {
			t.Errorf("%s: %d keyed reads (%+v), want %d", c.src, n, info, c.keyed)
		}
	}
}

// A loop's filter reads the loop around it (`loop` there is not its own): a body whose inner
// loop's filter reads loop.index reads its own position; one whose inner body does does not.
func TestBodyReadsTheLoopAnInnerFilterReads(t *testing.T) {
	for src, want := range map[string]bool{
		`{% for o in outer %}{% for s in items if s.n > loop.index %}{{ s }}{% endfor %}{% endfor %}`: true,
		`{% for o in outer %}{% for s in items if s.n > 1 %}{{ loop.index }}{% endfor %}{% endfor %}`: false,
	} {
		p, err := Compile(map[string]string{"t": src}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		info := bodyReads(p.templates["t"].tree.Body[0].(*parse.ForStmt))
		if !info.ok || info.loop != want {
			t.Errorf("%s: reads the position %v (%+v), want %v", src, info.loop, info, want)
		}
	}
}
