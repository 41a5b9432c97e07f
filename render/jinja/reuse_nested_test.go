package jinja

import (
	"fmt"
	"maps"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// nestedSrcs: a template importing a block per two items, the block importing a part per
// item: the part reads tag whole and looks its item up in res.by_name; the block reads bt.
func nestedSrcs() map[string]string {
	return map[string]string{
		"t": `{% set out = [] %}{% for b in items|batch(2) %}{% import "block" as bl with context %}{% do out.extend(bl.b_lines) %}{% endfor %}{{ out|join(",") }}`,
		"block": `{% set b_lines = [] %}{% for item in b %}{% import "part" as p with context %}` +
			`{% do b_lines.extend(p.lines) %}{% endfor %}{% do b_lines.append(bt) %}`,
		"part": `{% set s = res.by_name.get(item) %}{% set lines = [item ~ ":" ~ (s.port if s else "none") ~ tag] %}`,
	}
}

func nestedBase() map[string]any {
	svc := func(name, port string) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "port": port})
	}
	return map[string]any{
		"items": []any{"a", "b", "x", "c"},
		"tag":   "!",
		"bt":    "|",
		"res":   map[string]any{"by_name": map[string]any{"a": svc("a", "1"), "b": svc("b", "2"), "c": svc("c", "3")}},
	}
}

// setService gives the Service name a new port, in a new by_name map.
func setService(v map[string]any, name, port string) {
	m := maps.Clone(v["res"].(map[string]any)["by_name"].(map[string]any))
	m[name] = record.FromMap(nil, map[string]any{"name": name, "port": port})
	v["res"] = map[string]any{"by_name": m}
}

// nestedStep is one render of a sequence: a change of the data (kept for the next steps), and
// how many blocks and parts it takes from the cache.
type nestedStep struct {
	change        func(map[string]any)
	blocks, parts int
}

// A module imported in a loop that imports a part per item is kept while what it and its parts
// read is the same; a name only the parts read, or a key only a part looked up (computed, or
// taken from the cache while the block was computed), computes it again. Each render is
// compared with one afresh.
func TestNestedLoopImports(t *testing.T) {
	nothing := func(map[string]any) {}
	for _, c := range []struct {
		name  string
		srcs  map[string]string // over nestedSrcs
		steps []nestedStep
	}{
		{name: "nothing changed", steps: []nestedStep{{change: nothing, blocks: 2}}},
		{name: "a name only the parts read", steps: []nestedStep{{change: func(v map[string]any) { v["tag"] = "?" }}}},
		{name: "a name only the block reads", steps: []nestedStep{{change: func(v map[string]any) { v["bt"] = "/" }, parts: 4}}},
		{name: "a key a computed part looked up", steps: []nestedStep{
			{change: func(v map[string]any) { setService(v, "b", "20") }, blocks: 1, parts: 1}}},
		{name: "a key nobody looked up", steps: []nestedStep{
			{change: func(v map[string]any) { setService(v, "z", "20") }, blocks: 2}}},
		// The block computed again (bt), its parts from the cache: their lookups are the
		// block's; a change of one computes the block again.
		{name: "a key a part from the cache looked up", steps: []nestedStep{
			{change: func(v map[string]any) { v["bt"] = "/" }, parts: 4},
			{change: func(v map[string]any) { setService(v, "a", "10") }, blocks: 1, parts: 1},
			{change: func(v map[string]any) { setService(v, "c", "30") }, blocks: 1, parts: 1},
			{change: nothing, blocks: 2}}},
		// A part hinted (the same place as in the last render) and one found by hash alike.
		{name: "an item added", steps: []nestedStep{
			{change: func(v map[string]any) { v["items"] = []any{"a", "b", "x", "c", "b"} }, blocks: 2, parts: 1},
			{change: func(v map[string]any) { setService(v, "b", "20") }, blocks: 1, parts: 2}}},
		// Two levels: the block imports a middle part that imports the part.
		{name: "two levels deep", srcs: map[string]string{
			"block": `{% set b_lines = [] %}{% for item in b %}{% import "mid" as p with context %}` +
				`{% do b_lines.extend(p.lines) %}{% endfor %}{% do b_lines.append(bt) %}`,
			// Imported in a loop: a module that holds another (q at its top) is not kept.
			"mid": `{% set lines = [] %}{% for one in [1] %}{% import "part" as q with context %}{% do lines.extend(q.lines) %}{% endfor %}{% do lines.append(mt) %}`},
			steps: []nestedStep{
				{change: func(v map[string]any) { v["mt"] = "m" }, parts: 4},
				{change: func(v map[string]any) { setService(v, "c", "30") }, blocks: 1, parts: 1},
				{change: func(v map[string]any) { v["bt"] = "/" }, parts: 4},
				{change: func(v map[string]any) { setService(v, "a", "10") }, blocks: 1, parts: 1},
				{change: nothing, blocks: 2}}},
		// The part's macro, called by the block after the import, looks up by key too.
		{name: "a part's macro the block calls", srcs: map[string]string{
			"block": `{% set b_lines = [] %}{% for item in b %}{% import "part" as p with context %}` +
				`{% do b_lines.extend(p.lines) %}{% do b_lines.append(p.m(item)) %}{% endfor %}{% do b_lines.append(bt) %}`,
			"part": `{% macro m(k) %}{{ (res.by_name.get(k) or {}).port }}{% endmacro %}{% set lines = [item ~ tag] %}`},
			steps: []nestedStep{
				{change: func(v map[string]any) { setService(v, "c", "30") }, blocks: 1, parts: 2},
				{change: func(v map[string]any) { setService(v, "z", "30") }, blocks: 2}}},
		// What the block sets before the import (mark), and its loop's variable, the part reads
		// of the block: the importer's mark, another, is not read; set after, it is.
		{name: "a name the block sets before the import", srcs: map[string]string{
			"t": `{% set out = [] %}{% for b in items|batch(2) %}{% set mark = tag %}{% import "block" as bl with context %}{% do out.extend(bl.b_lines) %}{% endfor %}{{ out|join(",") }}`,
			"block": `{% set b_lines = [] %}{% set mark = "#" %}{% for item in b %}{% import "part" as p with context %}` +
				`{% do b_lines.extend(p.lines) %}{% endfor %}{% do b_lines.append(bt) %}`,
			"part": `{% set s = res.by_name.get(item) %}{% set lines = [item ~ ":" ~ (s.port if s else "none") ~ mark] %}`},
			steps: []nestedStep{
				{change: func(v map[string]any) { v["tag"] = "?" }, blocks: 2},
				{change: func(v map[string]any) { setService(v, "c", "30") }, blocks: 1, parts: 1}}},
		{name: "a name the block sets after the import", srcs: map[string]string{
			"t": `{% set out = [] %}{% for b in items|batch(2) %}{% set mark = tag %}{% import "block" as bl with context %}{% do out.extend(bl.b_lines) %}{% endfor %}{{ out|join(",") }}`,
			"block": `{% set b_lines = [] %}{% for item in b %}{% import "part" as p with context %}` +
				`{% do b_lines.extend(p.lines) %}{% endfor %}{% set mark = "#" %}{% do b_lines.append(bt ~ mark) %}`,
			"part": `{% set lines = [item ~ mark] %}`},
			steps: []nestedStep{
				{change: func(v map[string]any) { v["tag"] = "?" }},
				{change: func(v map[string]any) { v["bt"] = "/" }, parts: 4}}},
		// Not kept: an include, an import without context.
		{name: "a block that includes", srcs: map[string]string{"block": `{% set b_lines = [] %}{% include "part" %}`},
			steps: []nestedStep{{change: nothing}}},
		{name: "a block that imports without context", srcs: map[string]string{
			"block": `{% import "plain" as pl %}{% set b_lines = [pl.x] %}`, "plain": `{% set x = 1 %}`},
			steps: []nestedStep{{change: nothing}}},
		{name: "a cycle", srcs: map[string]string{
			"block": `{% set b_lines = [] %}{% if not b %}{% import "block" as me with context %}{% endif %}`},
			steps: []nestedStep{{change: nothing}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srcs := nestedSrcs()
			maps.Copy(srcs, c.srcs)
			p, err := Compile(srcs, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			nestedSteps(t, p, c.steps)
		})
	}
}

// nestedSteps renders nestedBase, then it changed by each step in turn, with one cache, and
// fails t when a render is not the one afresh or took other than the step's kept modules.
func nestedSteps(t *testing.T, p *Program, steps []nestedStep) {
	t.Helper()
	render := renderOf(t, p)
	var cache ModuleCache
	vars := nestedBase()
	if got, want := render(vars, &Modules{Across: &cache}), render(vars, nil); got != want {
		t.Fatalf("first render %q, computed afresh %q", got, want)
	}
	cache.Sweep()
	for i, s := range steps {
		blocks, parts := cache.LoopReused("block"), cache.LoopReused("part", "mid")
		s.change(vars)
		got, want := render(vars, &Modules{Across: &cache}), render(vars, nil)
		if got != want {
			t.Errorf("step %d: %q, computed afresh %q", i, got, want)
		}
		cache.Sweep()
		if b, n := cache.LoopReused("block")-blocks, cache.LoopReused("part", "mid")-parts; b != s.blocks || n != s.parts {
			t.Errorf("step %d: %d blocks and %d parts reused, want %d and %d (%q)", i, b, n, s.blocks, s.parts, got)
		}
	}
}

// A block is kept with the sources of the templates it imports: another part's source (the
// block's the same) computes it again.
func TestNestedLoopImportsPartEdited(t *testing.T) {
	srcs := nestedSrcs()
	p1, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	srcs["part"] = `{% set s = res.by_name.get(item) %}{% set lines = [item ~ "=" ~ (s.port if s else "none") ~ tag] %}`
	p2, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	vars := nestedBase()
	renderOf(t, p1)(vars, &Modules{Across: &cache})
	cache.Sweep()
	if got, want := renderOf(t, p2)(vars, &Modules{Across: &cache}), renderOf(t, p2)(vars, nil); got != want {
		t.Errorf("%q, computed afresh %q", got, want)
	}
}

// What a block reads: its own names and its parts' (but for the names it binds where it
// imports them: its loop's item), and their keyed reads; refused: an include, an import without context, a cycle, too
// deep. A template key is always a constant (a computed one does not compile).
func TestFreeReadsNested(t *testing.T) {
	parts := map[string]string{
		"part":  `{{ res.by_name.get(item) }}{{ tag }}{% for x in xs %}{{ x }}{% endfor %}`,
		"deep":  `{% import "part" as p with context %}{{ dt }}`,
		"cycle": `{% import "cycle" as c with context %}`,
		"d1":    `{% import "d2" as p with context %}`, "d2": `{% import "d3" as p with context %}`,
		"d3": `{% import "d4" as p with context %}`, "d4": `{% import "part" as p with context %}`,
		"inc": `{% include "part" %}`,
	}
	resolve := func(key string) *parse.Tree {
		if _, ok := parts[key]; !ok {
			return nil
		}
		tr, err := parse.Parse(parts[key])
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, c := range []struct{ src, want string }{
		{`{% for item in b %}{% import "part" as p with context %}{{ p.x }}{% endfor %}`, "b p.x res.by_name.get() tag xs"},
		{`{% for item in b %}{% from "part" import x with context %}{% endfor %}`, "b res.by_name.get() tag xs"},
		{`{% import "deep" as p with context %}{{ res.by_name }}`, "dt item res.by_name tag xs"},
		{`{% import "part" as p %}`, "!"},
		{`{% import "cycle" as p with context %}`, "!"},
		{`{% import "d1" as p with context %}`, "!"},
		{`{% import "inc" as p with context %}`, "!"},
		{`{% include "part" %}`, "!"},
		{`{% import "nothing" as p with context %}`, "!"},
	} {
		tree, err := parse.Parse(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		fi := freeNamesIn(tree, resolve)
		got := "!"
		if fi.ok {
			got = readNames(fi)
		}
		if got != c.want {
			t.Errorf("%s: reads %q, want %q", c.src, got, c.want)
		}
	}
	if _, err := Compile(map[string]string{"t": `{% set k = "part" %}{% import k as p with context %}`, "part": ""}, "t", Options{}); err == nil {
		t.Error("an import of a computed key compiled")
	}
}

// Renders of different data sharing one cache, at once, through blocks and their parts: each
// takes only what read the same in its data.
func TestNestedLoopImportsConcurrentRenders(t *testing.T) {
	p, err := Compile(nestedSrcs(), "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	varsOf := func(g int) map[string]any {
		v := nestedBase()
		v["tag"] = fmt.Sprint(g % 2)
		setService(v, "a", fmt.Sprint(g%3))
		setService(v, "c", fmt.Sprint(g%4))
		return v
	}
	cache := rendersAgreeConcurrently(t, p, varsOf)
	if cache.LoopReused("block") == 0 {
		t.Error("no block was reused")
	}
}
