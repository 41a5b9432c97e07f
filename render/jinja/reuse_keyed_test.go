package jinja

import (
	"context"
	"fmt"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A chain a module imported in a loop only calls get on is read by key (shown X.get());
// any other use of it, or of a chain on it or inside it, reads it as before.
func TestFreeReadsKeyed(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ d.get(k) }}{{ d.get("x", 1) }}`, "d.get() k"},
		{`{{ r.a.b.get(k) }}{{ r.c }}`, "k r.a.b.get() r.c"},
		{`{{ r.a.get(k) }}{{ r.b.get(k) }}`, "k r.a.get() r.b.get()"},
		// Other uses: as before.
		{`{{ d.get(k) }}{{ d }}`, "d k"},
		{`{{ d.get(k) }}{{ d.x }}`, "d k"},
		{`{{ d.get(k) }}{% for x in d %}{% endfor %}`, "d k"},
		{`{{ d.get(k) }}{{ d.items() }}`, "d k"},
		{`{{ d.get(k) }}{{ d[k] }}`, "d k"},
		{`{{ d.get(k) }}{{ k in d }}`, "d k"},
		{`{{ d.get(k) }}{{ d|length }}`, "d k"},
		{`{{ r.a.get(k) }}{{ r.a.b }}`, "k r.a"},
		{`{{ r.a.b.get(k) }}{{ r.a }}`, "k r.a"},
		{`{{ r.a.get(k) }}{{ r.get(k) }}`, "k r"},
		{`{{ r.a.get(k) }}{{ r.a.setdefault(k) }}`, "k r.a"},
		{`{{ d.get(k=1) }}`, "d"},
		{`{{ d.get() }}`, "d"},
		{`{{ d.get(*k) }}`, "d k"},
		{`{{ r.items.get(k) }}`, "k r"},
		{`{{ d.get }}`, "d"},
		// Bound where it is called: nothing of the importer's.
		{`{% macro m(d) %}{{ d.get(k) }}{% endmacro %}{% for x in xs %}{{ x.get(1) }}{% endfor %}`, "k xs"},
	} {
		tree, err := parse.Parse(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		fi := freeNames(tree)
		if got := readNames(fi); got != c.want {
			t.Errorf("%s: reads %q, want %q", c.src, got, c.want)
		}
		if n := len(fi.sites); n > 0 && !hasKeyed(fi) {
			t.Errorf("%s: %d sites and no keyed read", c.src, n)
		}
	}
}

func hasKeyed(fi freeInfo) bool {
	for _, r := range fi.reads {
		if r.keyed {
			return true
		}
	}
	return false
}

// A part that looks up d.get(KEY) is computed again when what get gives for its key changes,
// and not when anything else of d does. Each case renders twice with the cache and compares
// the second render with one afresh.
func TestLoopImportsReadKeys(t *testing.T) {
	svc := func(name, port string) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "port": port})
	}
	byName := func(v map[string]any) map[string]any { return v["res"].(map[string]any)["by_name"].(map[string]any) }
	base := func() map[string]any {
		return map[string]any{
			"items": []any{"a", "b", "x"},
			"res":   map[string]any{"by_name": map[string]any{"a": svc("a", "1"), "b": svc("b", "2"), "c": svc("c", "3")}},
			"nums":  map[string]any{"a": int64(1), "b": int64(2), "x": int64(3)},
		}
	}
	// The data as it was, a new map: the same, key by key.
	same := func(v map[string]any) {
		old := byName(v)
		m := map[string]any{}
		for k, x := range old {
			m[k] = x
		}
		v["res"] = map[string]any{"by_name": m}
	}
	const (
		part = `{% set s = res.by_name.get(item) %}{% set lines = [item ~ ":" ~ (s.port if s else "none")] %}`
		// The template's own dict, made again each render: compared key by key.
		mainOwn = `{% set own = {} %}{% for k, v in res.by_name.items() %}{% do own.update({k: v.port}) %}{% endfor %}` +
			`{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
		partOwn = `{% set lines = [item ~ ":" ~ own.get(item, "none")] %}`
	)
	const mainDicts = `{% set own = {"a": {"p": 1}, "b": {"p": 2}, "x": {"p": 3}} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
	main := `{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
	for _, c := range []struct {
		name   string
		srcs   map[string]string // over the default ones
		change func(v map[string]any)
		reused int
	}{
		{name: "nothing changed", change: func(map[string]any) {}, reused: 3},
		{name: "the same data, another map", change: same, reused: 3},
		{name: "another key's value", change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 3},
		{name: "another key added", change: func(v map[string]any) { byName(v)["d"] = svc("d", "4") }, reused: 3},
		{name: "its key's value", change: func(v map[string]any) { same(v); byName(v)["b"] = svc("b", "20") }, reused: 2},
		{name: "its key appears", change: func(v map[string]any) { same(v); byName(v)["x"] = svc("x", "9") }, reused: 2},
		{name: "its key disappears", change: func(v map[string]any) { same(v); delete(byName(v), "a") }, reused: 2},
		{name: "the key it computes", change: func(v map[string]any) { v["items"] = []any{"a", "c", "x"} }, reused: 2},
		// Never looked up (a branch not taken): what the chain is does not matter.
		{name: "not looked up", srcs: map[string]string{"part": `{% set lines = [item ~ (res.by_name.get(item).port if item == "q" else "")] %}`},
			change: func(v map[string]any) { v["res"] = map[string]any{"by_name": "a"} }, reused: 3},
		// The template's own dict, made each render.
		{name: "a dict the template makes, the same", srcs: map[string]string{"t": mainOwn, "part": partOwn}, change: same, reused: 3},
		{name: "a dict the template makes, another key", srcs: map[string]string{"t": mainOwn, "part": partOwn},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 3},
		{name: "a dict the template makes, replaced with another value at its key", srcs: map[string]string{"t": mainOwn, "part": partOwn},
			change: func(v map[string]any) { byName(v)["b"] = svc("b", "20") }, reused: 2},
		{name: "a dict the template makes, its key appears", srcs: map[string]string{"t": mainOwn, "part": partOwn},
			change: func(v map[string]any) { byName(v)["x"] = svc("x", "20") }, reused: 2},
		// A default: compared on what get found, the default computed from the rest.
		{name: "a default, its key disappears", srcs: map[string]string{"part": `{% set lines = [item ~ ":" ~ res.by_name.get(item, {"port": item ~ "?"}).port] %}`},
			change: func(v map[string]any) { same(v); delete(byName(v), "b") }, reused: 2},
		{name: "a default, another key", srcs: map[string]string{"part": `{% set lines = [item ~ ":" ~ res.by_name.get(item, {"port": item ~ "?"}).port] %}`},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 3},
		// Numbers are keys as strings are; a dict of the template with number keys.
		{name: "number keys", srcs: map[string]string{
			"t":    `{% set own = {1: nums.a, 2: nums.b, 3: nums.x} %}{% set out = [] %}{% for item in [1, 2, 4] %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`,
			"part": `{% set lines = [item ~ ":" ~ own.get(item)] %}`},
			change: func(v map[string]any) { v["nums"].(map[string]any)["b"] = int64(20) }, reused: 2},
		{name: "number keys, another key", srcs: map[string]string{
			"t":    `{% set own = {1: nums.a, 2: nums.b, 3: nums.x} %}{% set out = [] %}{% for item in [1, 2, 4] %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`,
			"part": `{% set lines = [item ~ ":" ~ own.get(item)] %}`},
			change: func(v map[string]any) { v["nums"].(map[string]any)["x"] = int64(30) }, reused: 3},
		// Keys that are not plain strings or numbers: never the same.
		{name: "a none key", srcs: map[string]string{"part": `{% set lines = [item ~ res.by_name.get(none)|string] %}`}, change: func(map[string]any) {}, reused: 0},
		{name: "an undefined key", srcs: map[string]string{"part": `{% set lines = [item ~ res.by_name.get(nothing)|string] %}`}, change: func(map[string]any) {}, reused: 0},
		{name: "a tuple key", srcs: map[string]string{"part": `{% set lines = [item ~ res.by_name.get((item, 1))|string] %}`}, change: func(map[string]any) {}, reused: 0},
		// A lookup on the part's own value of the name: never the same (that part only).
		{name: "a lookup on the part's own", srcs: map[string]string{"part": `{% if item == "b" %}{% set res = {"by_name": {"b": {"port": "own"}}} %}{% endif %}` + part},
			change: func(map[string]any) {}, reused: 2},
		// A chain also used otherwise is read whole: any change of it computes every part.
		{name: "also used whole", srcs: map[string]string{"part": part + `{% set n = res.by_name|length %}`},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 0},
		{name: "also iterated", srcs: map[string]string{"part": part + `{% for k in res.by_name %}{% endfor %}`},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 0},
		{name: "also tested with in", srcs: map[string]string{"part": part + `{% set n = "c" in res.by_name %}`},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 0},
		// A macro of the part, called by the importer after the import, looks again.
		{name: "a macro called after the import", srcs: map[string]string{
			"part": `{% macro m(k) %}{{ (res.by_name.get(k) or {}).port }}{% endmacro %}{% set lines = [item] %}`,
			"t":    `{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% do out.append(p.m("c")) %}{% endfor %}{{ out|join(",") }}`},
			change: func(v map[string]any) { byName(v)["c"] = svc("c", "30") }, reused: 3},
		// A part that changes what it looked up, or holds it, is never kept.
		{name: "a part that changes what it looked up", srcs: map[string]string{"t": mainDicts,
			"part": `{% do own.get(item).update({"z": 1}) %}{% set lines = [item ~ own.get(item).p] %}`}, change: func(map[string]any) {}, reused: 0},
		{name: "a part that holds what it looked up", srcs: map[string]string{"t": mainDicts,
			"part": `{% set o = own.get(item) %}{% set lines = [item ~ o.p] %}`}, change: func(map[string]any) {}, reused: 0},
		{name: "a part that reads what it looked up", srcs: map[string]string{"t": mainDicts,
			"part": `{% set lines = [item ~ own.get(item).p] %}`}, change: func(map[string]any) {}, reused: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			importsReused(t, map[string]string{"part": part, "t": main}, c.srcs, base, c.change, c.reused)
		})
	}
}

// Renders of different data sharing one cache, at once: each takes only parts whose lookups
// find the same in its data (what a part recorded is written before it is kept, and only
// read after).
func TestKeyedReadsConcurrentRenders(t *testing.T) {
	p, err := Compile(map[string]string{"part": `{% set lines = [item ~ ":" ~ own.get(item, "-") ~ ":" ~ (res.by_name.get(item) or {}).get("port", "-")] %}`,
		"t": `{% set own = {"a": res.tag, "b": "B"} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	varsOf := func(g int) map[string]any {
		return map[string]any{"items": []any{"a", "b", "c", "a"}, "res": map[string]any{"tag": fmt.Sprint("t", g%3),
			"by_name": map[string]any{"a": map[string]any{"port": int64(g % 2)}, "c": map[string]any{"port": int64(g % 4)}}}}
	}
	cache := rendersAgreeConcurrently(t, p, varsOf)
	if cache.LoopReused() == 0 {
		t.Error("no part was reused")
	}
}

// rendersAgreeConcurrently renders p from 8 goroutines at once, 20 times each with the vars
// varsOf(goroutine) and one shared cache (swept after each render), and reports each render
// that differs from that goroutine's computed afresh. It returns the cache, to ask what was
// reused.
func rendersAgreeConcurrently(t *testing.T, p *Program, varsOf func(g int) map[string]any) *ModuleCache {
	t.Helper()
	var cache ModuleCache
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			vars := varsOf(g)
			want, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, nil, false)
			for range 20 {
				if err != nil {
					break
				}
				var res Output
				res, err = p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
				if err == nil && string(res.Bytes) != string(want.Bytes) {
					err = fmt.Errorf("%q, computed afresh %q", res.Bytes, want.Bytes)
				}
				cache.Sweep()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	return &cache
}
