package jinja

import (
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// What a module reads of its importer leaves out a name it binds at its top (set, set block,
// unpacking, macro) before any read of it; a read before, in a set's own value, in a macro
// defined before the set, or after a set that may not run (if, loop, with, filter block) stays
// a read. Loop, macro and with bodies follow the same rule in their own frames.
func TestFreeNamesBoundFirst(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{% set notes = [] %}{% do notes.append(x) %}{{ notes }}`, "x"},
		{`{% set notes %}n{% endset %}{{ notes }}`, ""},
		{`{% set notes, served = [], [] %}{{ notes ~ served }}`, ""},
		{`{% macro notes() %}n{% endmacro %}{{ notes() }}`, ""},
		{`{% set found = namespace(d=none) %}{% set found.d = 1 %}{{ found.d }}`, "namespace"},
		{`{% set d = {} %}{{ d.a.b }}{{ d.get("k") }}`, ""},
		{`{% set notes = 1 %}{% macro m() %}{{ notes }}{% endmacro %}{% for i in xs %}{{ notes }}{% endfor %}{% if y %}{{ notes }}{% endif %}`, "xs y"},
		// Read first: the importer's.
		{`{{ notes }}{% set notes = [] %}{{ notes }}`, "notes"},
		{`{% set notes = notes ~ "+" %}{{ notes }}`, "notes"},
		{`{% set notes %}{{ notes }}{% endset %}`, "notes"},
		{`{% macro m() %}{{ notes }}{% endmacro %}{% set notes = [] %}{{ m() }}`, "notes"},
		// A set that may not run, or binds in a frame of its own: the importer's after it.
		{`{% if y %}{% set notes = [] %}{% endif %}{{ notes }}`, "notes y"},
		{`{% if y %}{% set notes = [] %}{% else %}{% set notes = [] %}{% endif %}{{ notes }}`, "notes y"},
		{`{% for i in xs %}{% set notes = [] %}{% endfor %}{{ notes }}`, "notes xs"},
		{`{% with %}{% set notes = [] %}{% endwith %}{{ notes }}`, "notes"},
		{`{% filter upper %}{% set notes = [] %}{% endfilter %}{{ notes }}`, "notes"},
		// Frames of their own: a loop's, a macro's, a with block's body.
		{`{% for i in xs %}{% set k = i %}{{ k }}{% endfor %}{{ k }}`, "k xs"},
		{`{% for i in xs %}{{ k }}{% set k = i %}{% endfor %}`, "k xs"},
		{`{% macro m() %}{% set k = 1 %}{{ k.a }}{% endmacro %}{% with %}{% set j = 1 %}{{ j }}{% endwith %}`, ""},
		// A loop's filter sees the loop's names, not its loop object: `loop` there is the
		// importer's (or an outer loop's), as the filter runs it.
		{`{% for i in xs if i > loop.index %}{{ loop.index }}{% endfor %}`, "loop xs"},
		{`{% for i in xs if i > 1 %}{{ loop.index }}{% endfor %}`, "xs"},
	} {
		tree, err := parse.Parse(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		fi := freeNames(tree)
		if !fi.ok {
			t.Errorf("%s: refused", c.src)
		}
		if got := readNames(fi); got != c.want {
			t.Errorf("%s: reads %q, want %q", c.src, got, c.want)
		}
	}
	// self and super stay the importer's blocks' even when set.
	for _, src := range []string{`{% set self = 1 %}{{ self }}`, `{% macro super() %}{% endmacro %}{{ super() }}`} {
		tree, err := parse.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if freeNames(tree).ok {
			t.Errorf("%s: kept", src)
		}
	}
}

// A part imported in a loop that sets a name of its importer's (notes, an accumulator the
// importer extends as it goes) before reading it is kept while the importer's notes change;
// one that reads it before setting it, or sets it only in an if, is computed again. Each case
// renders twice with the cache and compares the second render with one afresh.
func TestLoopImportsOwnNamesSetFirst(t *testing.T) {
	rec := func(name, port string) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "spec": map[string]any{"port": port}})
	}
	base := func() map[string]any {
		return map[string]any{"items": []any{rec("a", "1"), rec("b", "2"), rec("c", "3")}, "other": "x"}
	}
	const main = `{% set notes = [other] %}{% set served = [] %}{% set out = [] %}` +
		`{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}` +
		`{% do notes.extend(p.notes) %}{% do served.append(item.name) %}{% endfor %}{{ out|join(",") }}|{{ notes|join(",") }}`
	const part = `{% set notes = [] %}{% if item.spec.port == "2" %}{% do notes.append(item.name ~ " two") %}{% endif %}` +
		`{% set lines = [item.name ~ ":" ~ notes|length] %}`
	otherChanged := func(v map[string]any) { v["other"] = "y" }
	firstNoted := func(v map[string]any) { v["items"].([]any)[0] = rec("a", "2") }
	for _, c := range []struct {
		name   string
		part   string
		change func(map[string]any)
		reused int
	}{
		{"set first, the importer's notes changed before the loop", part, otherChanged, 3},
		{"set first, a note more from the first item", part, firstNoted, 2},
		{"set block, unpacking, a macro", `{% set notes %}{{ item.name }}{% endset %}{% set served, out = [notes], none %}` +
			`{% macro other() %}{{ served|length }}{% endmacro %}{% set notes = [] %}{% set lines = [notes|length ~ served[0] ~ other()] %}`, otherChanged, 3},
		{"a macro defined after the set", `{% set notes = [item.name] %}{% macro m() %}{{ notes|join }}{% endmacro %}{% set lines = [m()] %}{% set m = none %}`, otherChanged, 3},
		// The importer's notes are read: what they are at each import.
		{"read before the set", `{% set lines = [item.name ~ notes|join("+")] %}{% set notes = [] %}`, otherChanged, 0},
		{"read in its own set", `{% set notes = notes + [item.name] %}{% set lines = [notes|length] %}`, otherChanged, 0},
		{"set in an if", `{% if item.spec.port == "2" %}{% set notes = [] %}{% endif %}{% set lines = [item.name ~ notes|join("+")] %}{% set notes = [] %}`, otherChanged, 0},
		{"read in a macro defined before the set", `{% macro m() %}{{ notes|join("+") }}{% endmacro %}{% set lines = [item.name ~ m()] %}{% set notes = [] %}{% set m = none %}`, otherChanged, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			importsReused(t, map[string]string{"part": c.part, "t": main}, nil, base, c.change, c.reused)
		})
	}
}
