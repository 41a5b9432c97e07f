package jinja

import (
	"fmt"
	"testing"
)

// TestLazyFilterKeptAcrossRenders: a loop's filter that runs as the loop advances gives, with
// its results and the loop's iterations kept from one render to the next, what a fresh render
// gives: a filter reading what the body sets (never kept: a namespace), one reading the data
// only (kept) with a body reading loop.last (which runs the filter ahead), and a break before
// an item whose filter would fail.
func TestLazyFilterKeptAcrossRenders(t *testing.T) {
	base := func() map[string]any {
		var items []any
		for i := range 20 {
			items = append(items, map[string]any{"name": fmt.Sprintf("s%d", i), "port": int64(i % 3)})
		}
		return map[string]any{"items": items, "other": int64(1)}
	}
	edit := func(v map[string]any) { v["items"].([]any)[1] = map[string]any{"name": "s1", "port": int64(0)} }
	first := func(v map[string]any) { v["items"].([]any)[0] = map[string]any{"name": "s0", "port": int64(1)} }
	other := func(v map[string]any) { v["other"] = int64(0) }
	shorter := func(v map[string]any) { v["items"] = v["items"].([]any)[:18] }
	failing := func(v map[string]any) { v["items"].([]any)[10] = map[string]any{"name": "bad", "port": "x"} }
	for _, c := range []struct {
		name, t string
		change  func(map[string]any)
	}{
		{"first wins", `{% set ns = namespace(p=none) %}{% for s in items if ns.p is none and s.port != other %}{% set ns.p = s.name %}{% endfor %}{{ ns.p }}`, edit},
		{"first wins, the first changed", `{% set ns = namespace(p=none) %}{% for s in items if ns.p is none and s.port != other %}{% set ns.p = s.name %}{% endfor %}{{ ns.p }}`, first},
		{"data only, loop.last", `{% for s in items if s.port != other %}{{ s.name }}{% if not loop.last %},{% endif %}{% endfor %}`, edit},
		{"data only, loop.last, the last deleted", `{% for s in items if s.port != other %}{{ s.name }}{% if not loop.last %},{% endif %}{% endfor %}`, shorter},
		{"data only, the filter's name changed", `{% for s in items if s.port != other %}{{ s.name }}{{ (loop.nextitem or {}).name }};{% endfor %}`, other},
		{"data only, inner loops", `{% for a in items %}{% for s in items if s.port == a.port %}{{ s.name }}{% if loop.last %}.{% endif %}{% endfor %}{% endfor %}`, edit},
		{"a list the template made, loop.last", `{% for s in items|list if s.port != other %}{{ s.name }}{% if not loop.last %},{% endif %}{% endfor %}`, edit},
		{"a list the template made, loop.last, the last deleted", `{% for s in items|list if s.port != other %}{{ s.name }}{% if not loop.last %},{% endif %}{% endfor %}`, shorter},
		{"a list the template made, a break before an item that fails", `{% for s in items|list if s.port > 0 %}{{ s.name }}{% if loop.index == 3 %}{% break %}{% endif %}{% endfor %}`, failing},
		{"a break before an item that fails", `{% for s in items if s.port > 0 %}{{ s.name }}{% if loop.index == 3 %}{% break %}{% endif %}{% endfor %}`, failing},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(map[string]string{"t": c.t}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			reusedAfterChange(t, renderOf(t, p), base, c.change, bodiesReused)
		})
	}
}
