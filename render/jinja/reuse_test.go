package jinja

import (
	"context"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A module kept from the last render serves the next one only when nothing it can read
// differs: a module is computed again after any change of a context value it names, and of
// resources, of a resource it names when it names them one by one.
func TestModuleCacheReusesOnlyWhatReadsTheSame(t *testing.T) {
	rec := func(kv ...any) *record.Record {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return record.FromMap(nil, m)
	}
	routes, slices := rec("all", []any{rec("name", "r1")}), rec("all", []any{rec("name", "s1")})
	base := func() map[string]any {
		return map[string]any{"env": map[string]string{"A": "1"}, "other": "x",
			"resources": map[string]any{"routes": routes, "slices": slices}}
	}
	modules := map[string]string{
		"by-name":  `{% set names = resources.routes.all|map(attribute="name")|join(",") %}{% set a = env.A %}{% macro m() %}{{ names }}{% endmacro %}`,
		"by-item":  `{% set names = resources["routes"].all|map(attribute="name")|join(",") %}`,
		"whole":    `{% set r = resources %}{% set names = r.routes.all|map(attribute="name")|join(",") %}`,
		"by-get":   `{% set names = (resources.get("routes") or {}).all|map(attribute="name")|join(",") %}`,
		"includes": `{% set names = resources.routes.all|map(attribute="name")|join(",") %}{% include "empty" %}`,
	}
	for _, c := range []struct {
		name   string
		change func(v map[string]any)
		// reused: by module, whether the second render took the kept module
		reused map[string]bool
	}{
		{"nothing changed", func(map[string]any) {},
			map[string]bool{"by-name": true, "by-item": true, "whole": true, "includes": true, "by-get": true}},
		{"equal values, other objects", func(v map[string]any) {
			v["env"] = map[string]string{"A": "1"}
			v["resources"].(map[string]any)["routes"] = rec("all", []any{rec("name", "r1")})
		}, map[string]bool{"by-name": true, "by-item": true, "whole": true, "includes": true, "by-get": true}},
		{"a resource it does not name", func(v map[string]any) {
			v["resources"].(map[string]any)["slices"] = rec("all", []any{rec("name", "s2")})
		}, map[string]bool{"by-name": true, "by-item": true, "whole": false, "includes": true, "by-get": true}},
		{"a resource it names", func(v map[string]any) {
			v["resources"].(map[string]any)["routes"] = rec("all", []any{rec("name", "r2")})
		}, map[string]bool{"by-name": false, "by-item": false, "whole": false, "includes": false, "by-get": false}},
		{"a value one names (env)", func(v map[string]any) { v["env"] = map[string]string{"A": "2"} },
			map[string]bool{"by-name": false, "by-item": true, "whole": true, "includes": true, "by-get": true}},
		{"a value it does not name", func(v map[string]any) { v["other"] = "y" },
			map[string]bool{"by-name": true, "by-item": true, "whole": true, "includes": true, "by-get": true}},
	} {
		for mod, want := range c.reused {
			t.Run(c.name+"/"+mod, func(t *testing.T) {
				srcs := map[string]string{"m": modules[mod], "empty": "",
					"t": `{% import "m" as r with context %}{{ r.names }}{% if r.m %} {{ r.m() }}{% endif %}`}
				p, err := Compile(srcs, "t", Options{})
				if err != nil {
					t.Fatal(err)
				}
				var cache ModuleCache
				render := func(vars map[string]any) string {
					res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
					if err != nil {
						t.Fatal(err)
					}
					return string(res.Bytes)
				}
				render(base())
				next := base()
				c.change(next)
				got := render(next)
				fresh, err := p.RenderSharing(context.Background(), next, Limits{}, nil, nil, false)
				if err != nil {
					t.Fatal(err)
				}
				if got != string(fresh.Bytes) {
					t.Errorf("%q, computed afresh %q", got, fresh.Bytes)
				}
				if reused := cache.Reused() > 0; reused != want {
					t.Errorf("reused: %v, want %v", reused, want)
				}
			})
		}
	}
}

// A template set that tests which object a value is (sameas) computes its modules at each
// render: a kept module holds lists and dicts equal to the context's, not the same.
func TestModuleCacheLeavesIdentityTestsAlone(t *testing.T) {
	all := []any{"a"}
	vars := func() map[string]any {
		return map[string]any{"resources": map[string]any{"r": map[string]any{"all": all}}}
	}
	srcs := map[string]string{"m": `{% set all = resources.r.all %}`,
		"t": `{% import "m" as r with context %}{{ r.all is sameas resources.r.all }}`}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	for i := range 2 {
		all = []any{"a"} // equal, another list: as a snapshot makes it at each sync
		res, err := p.RenderSharing(context.Background(), vars(), Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Bytes) != "True" {
			t.Errorf("render %d: %q, want True", i, res.Bytes)
		}
	}
	if cache.Reused() != 0 {
		t.Errorf("reused %d times", cache.Reused())
	}
}
