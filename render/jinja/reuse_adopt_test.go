package jinja

import (
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A module imported in a loop that a render takes because what it read is the same data as
// what the render reads (other records of the same contents: the status writer's wave made
// every object anew) keeps the render's records as its reads from then on (adoptData), so that
// the next renders find them the same in one step; a module whose reads differ keeps those it
// was computed with. Whatever the renders give, every module kept holds what its reads give
// (its output made of them), and each render is the one computed afresh.
func TestLoopImportsAdoptTheSameDataOnly(t *testing.T) {
	rec := func(name string, port int64) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "spec": record.FromMap(nil, map[string]any{"port": port})})
	}
	items := func(ports ...int64) []any {
		var out []any
		for i, p := range ports {
			out = append(out, rec(fmt.Sprintf("r%d", i), p))
		}
		return out
	}
	part := `{% set lines = [] %}{% for r in b %}{% do lines.append(r.name ~ ":" ~ r.spec.port) %}{% endfor %}{% set out = lines|join(",") %}`
	main := `{% for b in items|batch(2) %}{% import "part" as p with context %}{{ p.out }};{% endfor %}`
	srcs := map[string]string{"main": main, "part": part}
	p, err := Compile(srcs, "main", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// What a module's reads give: its output made afresh of them.
	outOf := func(vals []any) string {
		var lines []string
		for _, v := range vals {
			l, ok := v.(*List)
			if !ok {
				continue
			}
			for _, r := range l.items {
				rr := r.(*record.Record)
				name, _ := rr.Get("name")
				spec, _ := rr.Get("spec")
				port, _ := spec.(*record.Record).Get("port")
				lines = append(lines, fmt.Sprintf("%v:%v", name, port))
			}
		}
		return strings.Join(lines, ",")
	}
	var cache ModuleCache
	steps := []struct {
		name  string
		items []any
	}{
		{"first", items(1, 2, 3, 4)},
		{"the same data, other records", items(1, 2, 3, 4)},
		{"a port of the first block changed", items(9, 2, 3, 4)},
		{"back to the first data, other records", items(1, 2, 3, 4)},
		{"the same again, other records", items(1, 2, 3, 4)},
	}
	for i, s := range steps {
		vars := map[string]any{"items": s.items}
		got := render1(t, p, vars, &Modules{Across: &cache})
		if want := render1(t, p, vars, nil); got != want {
			t.Fatalf("step %d (%s): %q, computed afresh %q", i, s.name, got, want)
		}
		cache.mu.Lock()
		for _, list := range cache.loop {
			for _, le := range list {
				out, _, _ := le.mod.vars.get("out")
				if want := outOf(le.vals); out != want {
					t.Errorf("step %d (%s): a kept module gives %q, its reads %q", i, s.name, out, want)
				}
				if i == 1 || i == 4 {
					// Taken for the same data: it holds this render's records.
					for _, v := range le.vals {
						if l, ok := v.(*List); ok {
							for _, r := range l.items {
								if !containsIdentical(s.items, r) {
									t.Errorf("step %d (%s): a kept module still reads another record of the same data", i, s.name)
								}
							}
						}
					}
				}
			}
		}
		cache.mu.Unlock()
		cache.Sweep()
	}
}

func containsIdentical(items []any, v any) bool {
	for _, it := range items {
		if it == v {
			return true
		}
	}
	return false
}
