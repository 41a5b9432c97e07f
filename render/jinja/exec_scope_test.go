package jinja

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// scanScopes: the names a template's top level sets before any mention there, outside an if,
// that a body inside it before the set mentions (the differential corpus, scoping.jinja's
// "top-level name" cases, checks what they read). Each source below starts with a macro
// that mentions every name.
func TestScanScopesTop(t *testing.T) {
	const reader = `{% macro r() %}{{ a ~ b ~ c ~ d ~ e ~ g ~ m }}{% endmacro %}`
	for _, c := range []struct{ src, want string }{
		{`{% macro m() %}{{ a }}{% endmacro %}{% set a = 1 %}`, "m a"},
		{`{{ a }}{% set a = 1 %}{% set b = a %}`, "b"},
		{`{% set a = a %}{% set ns.x = 1 %}{% set ns = 1 %}`, ""},
		{`{% set a, (b, c) = x %}{% set d %}{{ e }}{% endset %}{% set e = 1 %}`, "a b c d e"},
		{`{% import 'm' as a %}{% from 'm' import b, c as d %}`, "a b d"},
		{`{% if x %}{% set a = 1 %}{% else %}{% set b = 1 %}{% endif %}{% set a = 2 %}{% set c = 1 %}{% if y %}{% set c = 2 %}{% endif %}`, "c"},
		// Bodies of their own: their sets and reads are not the top's.
		{`{% for i in a %}{% set b = 1 %}{{ c }}{% else %}{{ d }}{% endfor %}{% set a = 1 %}{% set c = 1 %}{% set d = 1 %}`, "c d"},
		{`{% with w = a %}{{ b }}{% endwith %}{% filter f(c) %}{{ d }}{% endfilter %}{% call m(e) %}{{ g }}{% endcall %}{% set a, b, c, d, e, g = x %}`, "b d g"},
		{`{% block k %}{{ a }}{% endblock %}{% autoescape a %}{{ a }}{% endautoescape %}{% macro m(p=a) %}{% endmacro %}{% set a = 1 %}`, "m a"},
		{`{% include 'i' %}{% do a.append(1) %}{% set a = [] %}`, ""},
	} {
		tree, err := parse.Parse(reader + c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := strings.Join(scanScopes(tree.Body).top, " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.src, got, c.want)
		}
	}
	// A name no body before its set mentions cannot be read before it: no unsetName.
	for _, src := range []string{`{% set a = 1 %}{% macro m() %}{{ a }}{% endmacro %}{% for i in x %}{{ a }}{% endfor %}`, `{% macro m() %}{{ m() }}{% endmacro %}`} {
		tree, err := parse.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := scanScopes(tree.Body).top; len(got) > 0 {
			t.Errorf("%s: %q", src, got)
		}
	}
}

// scanScopes: the frames inside a template start undefined the names they set before any
// mention there, that a body inside them before the set mentions, but those a frame around
// them mentions.
func TestScanScopesInside(t *testing.T) {
	tree, err := parse.Parse(`{% macro r() %}{{ n }}{% endmacro %}` +
		`{% for i in xs %}{% macro m() %}{{ a }}{{ b }}{{ i }}{% endmacro %}{% set a = i %}{% set b = 1 %}{% set i = 2 %}{% set c = 1 %}` +
		`{% else %}{% macro q() %}{{ e }}{% endmacro %}{% set e = 1 %}{% endfor %}{{ b }}` +
		`{% macro n(p=d) %}{% macro q() %}{{ d ~ p }}{% endmacro %}{% set d = 1 %}{% set p = 1 %}` +
		`{% with w = 1 %}{% for j in [1] %}{{ k }}{{ w }}{% endfor %}{% set w = 2 %}{% set k = 3 %}{% endwith %}{% endmacro %}` +
		`{% filter f(g) %}{% call c() %}{{ g ~ h }}{% endcall %}{% set g = 1 %}{% set h = 1 %}{% endfilter %}` +
		`{% block bl %}{% set y %}{{ b }}{% endset %}{% set b = 1 %}{% endblock %}`)
	if err != nil {
		t.Fatal(err)
	}
	sc := scanScopes(tree.Body)
	var got []string
	walkTree(reflect.ValueOf(tree.Body), func(v reflect.Value) bool {
		if v.Kind() == reflect.Pointer && v.CanInterface() {
			if u, ok := sc.in[v.Interface()]; ok {
				got = append(got, fmt.Sprintf("%T:%s", v.Interface(), strings.Join(u, ",")))
			}
		}
		return true
	})
	for _, f := range tree.Body {
		if x, ok := f.(*parse.ForStmt); ok {
			got = append(got, "else:"+strings.Join(sc.in[&x.Else], ","))
		}
	}
	want := "*parse.ForStmt:a *parse.WithStmt:k *parse.FilterBlockStmt:h *parse.BlockStmt:b else:e"
	if strings.Join(got, " ") != want {
		t.Errorf("%s, want %s", strings.Join(got, " "), want)
	}
	if strings.Join(sc.top, " ") != "n" {
		t.Errorf("top %q", sc.top)
	}
}

// A module imported in a loop reads the context's value of a name its importer sets at its
// top after the loop (not set yet there): a kept module read it so, and serves only while the
// context's value is the same.
func TestLoopImportsReadTheContextWhereTheImporterHasNotSet(t *testing.T) {
	srcs := map[string]string{
		"t":    `{% for item in items %}{% import "part" as p with context %}{{ p.line }};{% endfor %}{% set other = "mine" %}`,
		"part": `{% set line = item ~ other %}`,
	}
	base := func() map[string]any { return map[string]any{"items": []any{"a", "b"}, "other": "x"} }
	importsReused(t, srcs, nil, base, func(v map[string]any) { v["other"] = "y" }, 0)
	importsReused(t, srcs, nil, base, func(v map[string]any) { v["items"] = []any{"b", "c"} }, 1)
}

// A module imported with context at the top of a template, before it sets anything, is
// shared with the other renders (Modules) though the template sets names after: those, not
// set yet, are not what the module sees.
func TestSharedModuleBeforeTheNamesSetAfter(t *testing.T) {
	srcs := map[string]string{"m": `{% set v = later ~ "!" %}`, "t": `{% import "m" as r with context %}{% set later = 1 %}{{ r.v }}`}
	mods := &Modules{}
	if got := renderFiles(t, srcs, []string{"t"}, map[string]any{"later": "ctx"}, mods); got[0] != "ctx!" {
		t.Fatalf("got %q", got[0])
	}
	if mods.m["m"].mod == nil {
		t.Error("the module is not shared")
	}
}

// A loop's body kept across renders (reuse_body.go) whose inner loop reads, before the body's
// set, a name the body sets reads it undefined, not the context's: the kept iterations serve
// though the context's value changed, and render as afresh.
func TestLoopBodiesReadTheirNamesUnset(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for s in items %}{% for p in s.pods %}[{{ x }}]{% endfor %}{% set x = s.name %}{{ x }};{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := func() map[string]any {
		return map[string]any{"x": "ctx", "items": []any{
			map[string]any{"name": "a", "pods": []any{"a-0"}}, map[string]any{"name": "b", "pods": []any{"b-0", "b-1"}}}}
	}
	got, n := reusedAfterChange(t, renderOf(t, p), base, func(v map[string]any) { v["x"] = "other" }, bodiesReused)
	if got != "[]a;[][]b;" || n != 2 {
		t.Errorf("%q, reused %d iterations, want 2", got, n)
	}
}
