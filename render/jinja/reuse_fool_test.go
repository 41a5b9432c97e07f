package jinja

import (
	"fmt"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Kept iterations, filters and modules next to what could fool them: each template is
// rendered through a module cache and afresh at each step of a sequence of changes, and the
// outputs compared.
func TestKeptRendersBesideWhatCouldFoolThem(t *testing.T) {
	items := func(names ...string) []any {
		var out []any
		for i, n := range names {
			out = append(out, record.Of(nil, map[string]any{"name": n, "n": int64(i % 7), "f": float64(i) / 2,
				"kids": []any{map[string]any{"name": n + "k", "n": int64(i % 3)}}, "m": map[string]any{"a": n, "b": int64(i)}}))
		}
		return out
	}
	names := []string{"a", "b", "<c>", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"}
	base := items(names...)
	changed := slices.Clone(base)
	changed[4] = items("E")[0]
	fewer := slices.Clone(base[:3])
	steps := []map[string]any{
		{"items": base, "outer": []any{int64(1), int64(3), int64(5)}, "esc": true, "lim": int64(3), "x": int64(1), "fl": 1.5, "d": map[string]any{"a": int64(1), "b": int64(2)}},
		{"items": base, "outer": []any{int64(1), int64(4), int64(5)}, "esc": true, "lim": int64(3), "x": "1", "fl": 1.5, "d": map[string]any{"a": int64(1), "b": int64(2)}},
		{"items": changed, "outer": []any{int64(1), int64(4), int64(5)}, "esc": false, "lim": int64(4), "x": int64(1), "fl": 2.5, "d": map[string]any{"a": int64(1), "b": int64(3)}},
		{"items": fewer, "outer": []any{int64(2), int64(4)}, "esc": false, "lim": int64(4), "x": nil, "fl": 2.5, "d": map[string]any{"a": int64(1)}},
		{"items": base, "outer": []any{int64(2), int64(4)}, "esc": true, "lim": int64(3), "x": int64(2), "fl": 1.5, "d": map[string]any{"a": int64(1), "b": int64(2)}},
		{"items": base, "outer": []any{int64(2), int64(4)}, "esc": true, "lim": int64(3), "x": int64(2), "fl": 1.5, "d": map[string]any{"a": int64(1), "b": int64(2)}},
		{"items": []any{}, "outer": []any{}, "esc": true, "lim": int64(3), "x": int64(2), "fl": 1.5, "d": map[string]any{}},
		{"items": base, "outer": []any{int64(2), int64(4)}, "esc": true, "lim": int64(3), "x": int64(2), "fl": 1.5, "d": map[string]any{"a": int64(1), "b": int64(2)}},
	}
	for i, vars := range steps {
		var pairs []any
		for j, it := range vars["items"].([]any) {
			pairs = append(pairs, []any{it.(*record.Record).Field("name"), []any{int64(j % 3), fmt.Sprint(i)}})
		}
		vars["pairs"] = pairs
	}
	for name, src := range map[string]string{
		"an outer loop kept in a name":                `{% for o in outer %}{% set ol = loop %}{% for s in items %}{{ s.name }}{{ ol.index }}{% endfor %}{% endfor %}`,
		"an outer loop's length in a filter":          `{% for o in outer %}[{% for s in items if s.n < loop.length %}{{ s.name }}{% if s.n %}+{% endif %}{% endfor %}]{% endfor %}`,
		"a filter's else":                             `{% for s in items if s.n > lim %}{% if s.n %}{{ s.name }}{% endif %}{% else %}none{% endfor %}`,
		"a filter reading a number or a string alike": `{% for s in items if s.n == x or s.n|string == x %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a filter reading a float":                    `{% for s in items if s.f > fl %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a filter reading none":                       `{% for s in items if x is none or (x is number and s.n > x) %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a namespace counted":                         `{% set ns = namespace(c=0) %}{% for s in items %}{% if s.n %}{% set ns.c = ns.c + 1 %}{{ s.name }}{{ ns.c }}{% endif %}{% endfor %}`,
		"range in the body":                           `{% for s in items %}{% for i in range(s.n) %}{{ s.name }}{{ i }}{% endfor %}{% endfor %}`,
		"a test with an outer argument":               `{% for o in outer %}{% for s in items if s.n is divisibleby(o) %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}{% endfor %}`,
		"a data dict's items":                         `{% for k, v in d.items() %}{% if v %}{{ k }}={{ v }}{% endif %}{% endfor %}{% for s in items %}{% for k, v in s.m.items() %}{{ k }}{{ v }}{% endfor %}{% endfor %}`,
		"unpacked pairs":                              `{% for a, (b, c) in pairs if a %}{% if b %}{{ a }}{{ b }}{{ c }}{% endif %}{% endfor %}`,
		"a sorted loop":                               `{% for s in items|sort(attribute="n") %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a cycler":                                    `{% set c = cycler("x", "y") %}{% for s in items %}{% if s.n %}{{ s.name }}{{ c.next() }}{% endif %}{% endfor %}`,
		"a caller":                                    `{% macro m() %}{% for s in items %}{% if s.n %}{{ caller(s) }}{% endif %}{% endfor %}{% endmacro %}{% call(s) m() %}{{ s.name }}{{ x }}{% endcall %}`,
		"a filter block around":                       `{% filter upper %}{% for s in items %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}{% endfilter %}{% for s in items %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a break on a name of outside":                `{% for s in items %}{% if s.n == lim %}{% break %}{% endif %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}`,
		"a loop's previous item":                      `{% for s in items %}{% if loop.previtem and s.n %}{{ loop.previtem.name }}{% endif %}{% endfor %}`,
		"a loop changed":                              `{% for s in items %}{% if loop.changed(s.n > 2) %}{{ s.name }}{% endif %}{% endfor %}`,
		"the same loop at two depths": `{% macro m(xs, d) %}{% for s in xs %}{% if s.n %}{{ s.name }}{{ d }}{% endif %}{% endfor %}{% endmacro %}` +
			`{{ m(items, 1) }}{% for o in outer %}{{ m(items[:o], o) }}{% endfor %}`,
		"autoescape by a name": `{% macro m() %}{% for s in items %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}{% endmacro %}{% autoescape esc %}{{ m() }}{% endautoescape %}{{ m() }}`,
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Compile(map[string]string{"t": src}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := newKeptRenders(t, renderOrFail(t, p))
			for i, vars := range steps {
				k.step(vars, "step %d", i)
			}
		})
	}
}

// A module imported in a loop, whose loop's filter reads the loop around the import.
func TestKeptModuleFilterReadingTheImportersLoop(t *testing.T) {
	p, err := Compile(map[string]string{
		"t": `{% for o in outer %}{% import "m" as m with context %}[{{ m.out }}]{% endfor %}`,
		"m": `{% set out %}{% for s in items if s.n > loop.index %}{{ s.name }}{% endfor %}{% endset %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var items []any
	for i := range 20 {
		items = append(items, record.Of(nil, map[string]any{"name": fmt.Sprint("s", i), "n": int64(i % 7)}))
	}
	k := newKeptRenders(t, renderOrFail(t, p))
	for i, outer := range [][]any{{"a", "b", "c"}, {"a", "b", "c"}, {"b", "a"}, {"a", "b", "c", "d"}} {
		k.step(map[string]any{"items": items, "outer": outer}, "step %d", i)
	}
}

// The kept answers of selectattr, sort, unique, join and split, and modules imported in a
// loop, next to arguments that change from one rendering to the next.
func TestKeptCallsBesideArgumentsThatChange(t *testing.T) {
	var items []any
	for i := range 80 {
		items = append(items, record.Of(nil, map[string]any{"name": fmt.Sprintf("N%02d", (i*37)%80), "low": fmt.Sprintf("n%02d", i%9),
			"on": i%3 == 0, "off": i%4 == 0, "n": int64(i % 11)}))
	}
	var strs []any
	for i := range 80 {
		strs = append(strs, fmt.Sprintf("s%d,x%d", i%13, i))
	}
	steps := []map[string]any{
		{"a": "on", "key": "name", "rev": false, "cs": false, "sep": ",", "keep": int64(3)},
		{"a": "off", "key": "name", "rev": false, "cs": false, "sep": ",", "keep": int64(3)},
		{"a": "off", "key": "low", "rev": true, "cs": true, "sep": ";", "keep": int64(3)},
		{"a": "on", "key": "low", "rev": true, "cs": false, "sep": "x", "keep": int64(4)},
		{"a": "on", "key": "n", "rev": false, "cs": true, "sep": ",", "keep": int64(4)},
		{"a": "on", "key": "n", "rev": false, "cs": true, "sep": ",", "keep": int64(4)},
	}
	for i, vars := range steps {
		vars["items"], vars["strs"] = items, strs
		if i == 4 {
			vars["items"] = slices.Concat(items[:40], items[41:])
		}
	}
	for name, tmpls := range map[string]map[string]string{
		"selectattr by a name": {"t": `{% for s in items|selectattr(a) %}{{ s.name }}{% endfor %}|{{ items|rejectattr(a)|map(attribute="name")|join }}`},
		"sort by a name":       {"t": `{{ items|sort(attribute=key, reverse=rev, case_sensitive=cs)|map(attribute="name")|join(",") }}`},
		"unique by a name":     {"t": `{{ items|unique(cs, attribute=key)|map(attribute="name")|join(",") }}`},
		"join and split":       {"t": `{{ strs|join(sep) }}|{{ (strs|join(",")).split(sep)|length }}|{{ (strs|join(",")).split(sep, keep)|last }}`},
		"a module reading a name the loop sets": {
			"t": `{% for b in items|batch(8) %}{% set first = b[0].name ~ key %}{% import "m" as m with context %}{{ m.out }};{% endfor %}`,
			"m": `{% set out = first ~ ":" ~ (ingresses|default([])|length) %}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Compile(tmpls, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := newKeptRenders(t, renderOrFail(t, p))
			for i, vars := range steps {
				k.step(vars, "step %d", i)
			}
		})
	}
}

// renderOrFail renders p with mods, failing the test on an error: every step renders.
func renderOrFail(t *testing.T, p *Program) func(vars map[string]any, mods *Modules) string {
	return func(vars map[string]any, mods *Modules) string {
		t.Helper()
		res, err := p.RenderSharing(t.Context(), vars, Limits{}, nil, mods, false)
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Bytes)
	}
}
