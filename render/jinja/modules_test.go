package jinja

import (
	"context"
	"testing"
)

// renderFiles renders each of mains (keys of srcs) with vars, sharing mods (nil: nothing
// shared), and returns the outputs in order. With last, the last render is told it is
// (Modules.Last).
func renderFiles(t *testing.T, srcs map[string]string, mains []string, vars map[string]any, mods *Modules, last ...bool) []string {
	t.Helper()
	var out []string
	for i, main := range mains {
		if len(last) > 0 && last[0] && i == len(mains)-1 {
			mods.Last()
		}
		p, err := Compile(srcs, main, Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
		if err != nil {
			t.Fatalf("%s: %v", main, err)
		}
		out = append(out, string(res.Bytes))
	}
	return out
}

// Templates that import one module with context render as they do on their own when they
// share their modules: the module is computed once for those that import it first thing, and
// each gets values of its own.
func TestSharedModulesRenderAsUnshared(t *testing.T) {
	routes := `{% set items = [] %}{% set d = {"k": 1} %}{% set ns = namespace(n=0) %}` +
		`{% for s in services %}{% do items.append(s.name) %}{% set ns.n = ns.n + 1 %}{% endfor %}` +
		`{% set seen = x|default("none") %}`
	vars := map[string]any{"services": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	for _, c := range []struct {
		name  string
		files map[string]string // rendered in key order: a, b, c
		want  []string
		// shared: whether the module is kept for the templates after the first
		shared bool
		// taken: the last template takes the module kept (it imports it first thing)
		taken bool
	}{{
		name: "what one template does to the module's values is not seen by another",
		files: map[string]string{
			"a": `{% import "m" as r with context %}{% do r.items.append("z") %}{% do r.d.update({"k": 2}) %}{% set ns = r.ns %}{% set ns.n = 9 %}{{ r.items|join(",") }} {{ r.d.k }} {{ r.ns.n }}`,
			"b": `{% import "m" as r with context %}{{ r.items|join(",") }} {{ r.d.k }} {{ r.ns.n }}`,
			"c": `{% import "m" as r with context %}{% do r.items.append("y") %}{{ r.items|join(",") }}`,
		},
		want:   []string{"a,b,z 2 9", "a,b 1 2", "a,b,y"},
		shared: true,
		taken:  true,
	}, {
		name: "a module imported after a variable was set sees it, and is not shared",
		files: map[string]string{
			"a": `{% set x = "from a" %}{% import "m" as r with context %}{{ r.seen }}`,
			"b": `{% import "m" as r with context %}{{ r.seen }}`,
			"c": `{% set x = "from c" %}{% import "m" as r with context %}{{ r.seen }}`,
		},
		want: []string{"from a", "none", "from c"},
		// b computed it, with nothing set before: kept
		shared: true,
	}, {
		// A template that only reads the module takes the copy kept, not a copy of it; one that
		// could change it (here through another module it imports) gets a copy of its own.
		name: "templates that only read share the module kept",
		files: map[string]string{
			"a": `{% import "m" as r with context %}{{ r.items|join(",") }}`,
			"b": `{% import "m" as r with context %}{% import "n" as o with context %}{{ r.items|join(",") }}`,
			"c": `{% import "m" as r with context %}{{ r.items|join(",") }} {{ r.d.k }}`,
		},
		want:   []string{"a,b", "a,b,n", "a,b 1"},
		shared: true,
	}, {
		name: "a template that changes the module between two that only read it",
		files: map[string]string{
			"a": `{% import "m" as r with context %}{{ r.items|join(",") }}`,
			"b": `{% import "m" as r with context %}{% set f = r.items.append %}{% do f("x") %}{{ r.items|join(",") }}`,
			"c": `{% import "m" as r with context %}{{ r.items|join(",") }} {{ r.ns.n }}`,
		},
		want:   []string{"a,b", "a,b,x", "a,b 2"},
		shared: true,
	}, {
		name: "a module that exports a macro is shared: the macro sees what the template importing it set",
		files: map[string]string{
			"a": `{% import "mac" as r with context %}{% set z = "a" %}{{ r.show() }}`,
			"b": `{% import "mac" as r with context %}{% set z = "b" %}{{ r.show() }}`,
			"c": `{% import "mac" as r with context %}{{ r.show() }}`,
		},
		want:   []string{"[a]", "[b]", "[-]"},
		shared: true,
		taken:  true,
	}, {
		// The macros read the module's variables: the copy's, which the template changed
		// through another name, as they would read the module's own.
		name: "a module's macros see its values as the template importing it changed them",
		files: map[string]string{
			"a": `{% import "vals" as r with context %}{% do r.d.update({"k": 5}) %}{{ r.show() }} {{ r.e.k }} {{ r.twice() }} {{ r.by.s() }}`,
			"b": `{% import "vals" as r with context %}{{ r.show() }} {{ r.e.k }} {{ r.twice() }} {{ r.by.s() }}{{ r.inif() }}`,
			"c": `{% import "vals" as r with context %}{% do r.e.update({"k": 7}) %}{% do r.l.append(3) %}{{ r.show() }} {{ r.d.k }} {{ r.twice() }}`,
		},
		want:   []string{"5 5 5:5:1,2 5", "1 1 1:1:1,2 1<1>", "7 7 7:7:1,2,3"},
		shared: true,
		taken:  true,
	}, {
		name: "a module holding a macro of another module is computed for each import",
		files: map[string]string{
			"a": `{% import "other" as r with context %}{% set z = "a" %}{{ r.show() }}`,
			"b": `{% import "other" as r with context %}{{ r.show() }}`,
			"c": `{% import "other" as r with context %}{% set z = "c" %}{{ r.show() }}`,
		},
		want:   []string{"[-]", "[-]", "[-]"}, // imported without context, show sees no z
		shared: false,
	}} {
		t.Run(c.name, func(t *testing.T) {
			srcs := map[string]string{"m": routes, "mac": `{% macro show() %}[{{ z|default("-") }}]{% endmacro %}`,
				"vals": `{% set d = {"k": 1} %}{% set e = d %}{% set _l = [1, 2] %}{% set l = _l %}` +
					`{% macro show() %}{{ d.k }}{% endmacro %}{% macro twice() %}{{ show() }}:{{ e.k }}:{{ _l|join(",") }}{% endmacro %}` +
					`{% set by = {"s": show} %}{% if d %}{% macro inif() %}<{{ e.k }}>{% endmacro %}{% endif %}`,
				"other": `{% from "mac" import show %}`, "n": `{% do r.items.append("n") %}{% do r.d.update({"k": 2}) %}`}
			for k, v := range c.files {
				srcs[k] = v
			}
			mains := []string{"a", "b", "c"}
			alone := renderFiles(t, srcs, mains, vars, nil)
			mods := &Modules{}
			shared := renderFiles(t, srcs, mains, vars, mods)
			for i := range mains {
				if shared[i] != alone[i] {
					t.Errorf("%s: %q sharing modules, %q alone", mains[i], shared[i], alone[i])
				}
				if c.want != nil && alone[i] != c.want[i] {
					t.Errorf("%s: %q, want %q", mains[i], alone[i], c.want[i])
				}
			}
			if got := len(mods.m) > 0; got != c.shared {
				t.Errorf("module kept for sharing: %v, want %v", got, c.shared)
			}
			// The last render told it is takes the module kept, and renders the same.
			handed := &Modules{}
			for i, out := range renderFiles(t, srcs, mains, vars, handed, true) {
				if out != alone[i] {
					t.Errorf("%s: %q sharing modules, the last render taking the kept one; %q alone", mains[i], out, alone[i])
				}
			}
			if c.taken && len(handed.m) != 0 {
				t.Errorf("the last render left %d modules kept: it copied rather than took them", len(handed.m))
			}
		})
	}
}

// Modules given another context compute again: a module is shared only among renders of one
// context.
func TestSharedModulesFollowTheContext(t *testing.T) {
	srcs := map[string]string{"m": `{% set names = services|map(attribute="name")|join(",") %}`, "t": `{% import "m" as r with context %}{{ r.names }}`}
	mods := &Modules{}
	one := map[string]any{"services": []any{map[string]any{"name": "a"}}}
	two := map[string]any{"services": []any{map[string]any{"name": "b"}, map[string]any{"name": "c"}}}
	if got := renderFiles(t, srcs, []string{"t", "t"}, one, mods); got[0] != "a" || got[1] != "a" {
		t.Fatalf("first context: %q", got)
	}
	if got := renderFiles(t, srcs, []string{"t"}, two, mods); got[0] != "b,c" {
		t.Fatalf("another context: %q, want %q", got[0], "b,c")
	}
}

// With a ModuleCache, the files of a render share the copy it keeps for the next render, lent
// to each in turn: a template that changes the module's values (here the first and the last)
// has the copy it changes to itself, and a copy of it as it was takes its place, so that the
// next files and renders render as they do on their own. A last render that took the kept
// copy over, or a template whose change is seen by another, fails the second and third renders.
func TestSharedModulesKeptAcrossRenders(t *testing.T) {
	srcs := map[string]string{
		"m": `{% set items = [] %}{% set d = {"k": 1} %}{% for s in services %}{% do items.append(s.name) %}{% endfor %}`,
		"a": `{% import "m" as r with context %}{% do r.items.append("z") %}{% do r.d.update({"k": 2}) %}{{ r.items|join(",") }} {{ r.d.k }}`,
		"b": `{% import "m" as r with context %}{{ r.items|join(",") }} {{ r.d.k }}`,
		"c": `{% import "m" as r with context %}{% do r.items.append("y") %}{{ r.items|join(",") }}`,
	}
	vars := map[string]any{"services": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	mains := []string{"a", "b", "c"}
	alone := renderFiles(t, srcs, mains, vars, nil)
	var cache ModuleCache
	for r := range 3 {
		mods := &Modules{Across: &cache}
		for i, out := range renderFiles(t, srcs, mains, vars, mods, true) {
			if out != alone[i] {
				t.Errorf("render %d, %s: %q sharing the kept module, %q alone", r+1, mains[i], out, alone[i])
			}
		}
		if k := cache.m["m"]; k == nil || k.spoiled.Load() || k.holder != nil {
			t.Errorf("render %d: the module kept is one a template changed, or still lent", r+1)
		}
	}
	if got := cache.Reused(); got != 2 {
		t.Errorf("the kept module served %d renders, want 2", got)
	}
}
