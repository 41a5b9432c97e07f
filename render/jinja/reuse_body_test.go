package jinja

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A loop's iteration is kept per value of what its body reads: the next render writes a kept
// iteration's output for the items whose reads are the same, and runs the body for any
// other. Each case renders twice with the cache (the second time after change) and compares
// each render, its secret spans included, with one computed afresh; "reused" is how many of
// the second render's iterations took a kept one. A cache that compared less than what a body
// reads renders otherwise than afresh, or reuses more than the case says.
func TestLoopBodiesReuseOnlyWhatReadsTheSame(t *testing.T) {
	item := func(name, port string) map[string]any {
		return map[string]any{"name": name, "port": port, "pods": []any{name + "-0", name + "-1"}}
	}
	base := func() map[string]any {
		return map[string]any{"items": []any{item("a", "1"), item("b", "2"), item("c", "3")},
			"env": map[string]any{"SUFFIX": "!"}, "other": "x", "d": map[string]any{"k1": "v1", "k2": "v2"},
			"pw": Secret("hunter2")}
	}
	same := func(map[string]any) {}
	edit := func(v map[string]any) { v["items"].([]any)[1] = item("b", "20") }
	other := func(v map[string]any) { v["other"] = "y" }
	// |string: a body that only prints what it reads is run, never kept (printsOnly).
	plain := `{% for s in items %}[{{ s.name|string }}:{{ s.port }}]{% endfor %}`
	ownDict := `{% set cfg = {"sep": other, "n": [1, 2]} %}{% for s in items %}{% for p in s.pods %}{{ p }}{{ cfg.sep }}{% endfor %}{{ cfg.n }}{% endfor %}`
	// As the HTTPRoute example's backends: rows made by one loop, printed by another.
	ownRows := `{% set rows = [] %}{% for s in items %}{% do rows.append([s.name, {"port": s.port, "tags": [other, s.pods]}]) %}{% endfor %}` +
		`{% for name, d in rows %}{% for t in d.tags %}{{ name }}:{{ t }}:{{ d.port }};{% endfor %}{% endfor %}`
	for _, c := range []struct {
		name   string
		t      string
		srcs   map[string]string
		change func(v map[string]any)
		reused int
	}{
		{"nothing changed", plain, nil, same, 3},
		{"equal items, other objects", plain, nil, func(v map[string]any) {
			v["items"] = []any{item("a", "1"), item("b", "2"), item("c", "3")}
		}, 3},
		{"one item changed", plain, nil, edit, 2},
		{"an item added first", plain, nil, func(v map[string]any) {
			v["items"] = append([]any{item("z", "0")}, v["items"].([]any)...)
		}, 3},
		{"an item deleted", plain, nil, func(v map[string]any) {
			v["items"] = slices.Delete(v["items"].([]any), 0, 1)
		}, 2},
		{"a context value the body reads", `{% for s in items %}{{ s.name }}{{ env.SUFFIX }}{% endfor %}`, nil,
			func(v map[string]any) { v["env"] = map[string]any{"SUFFIX": "?"} }, 0},
		{"a context value the body does not read", plain, nil, other, 3},
		{"a name not set, then set", `{% for s in items %}{{ s.name }}{{ maybe|default("-") }}{% endfor %}`, nil,
			func(v map[string]any) { v["maybe"] = "+" }, 0},
		{"a dict's pairs, one changed", `{% for k, v in d.items() %}{{ k|string }}={{ v }};{% endfor %}`, nil,
			func(v map[string]any) { v["d"] = map[string]any{"k1": "v1", "k2": "v3"} }, 1},
		{"nested loops, one item's inner list changed", `{% for s in items %}{% for p in s.pods %}{{ p }},{% endfor %}{% endfor %}`, nil,
			func(v map[string]any) { v["items"].([]any)[2].(map[string]any)["pods"] = []any{"c-9"} }, 2},
		{"a loop filter", `{% for s in items if s.port != other %}{{ s.name|string }}{% endfor %}`, nil, edit, 2},
		{"a list the template makes", `{% for s in [{"a": other}, {"a": 2}] %}{{ s.a }}{% endfor %}`, nil, other, 0}, // a dict the template made: not kept (readsOwn)

		// The loop's position: loop.index and the like are read; an item added before or at
		// the end changes them.
		{"loop.index, an item deleted first", `{% for s in items %}{{ loop.index }}{{ s.name }}{% endfor %}`, nil,
			func(v map[string]any) { v["items"] = slices.Delete(v["items"].([]any), 0, 1) }, 0},
		{"loop.index, nothing changed", `{% for s in items %}{{ loop.index }}{{ s.name }}{% endfor %}`, nil, same, 3},
		{"loop.last, an item added last", `{% for s in items %}{{ s.name }}{% if not loop.last %},{% endif %}{% endfor %}`, nil,
			func(v map[string]any) { v["items"] = append(v["items"].([]any), item("d", "4")) }, 0},
		{"loop.length in an inner loop's iterable", `{% for s in items %}{% for i in range(loop.length) %}{{ i }}{% endfor %}{% endfor %}`, nil,
			func(v map[string]any) { v["items"] = v["items"].([]any)[:2] }, 0},
		{"loop.cycle, an item deleted first", `{% for s in items %}{{ loop.cycle("odd", "even") }}{{ s.name }}{% endfor %}`, nil,
			func(v map[string]any) { v["items"] = slices.Delete(v["items"].([]any), 0, 1) }, 0},
		{"loop.previtem", `{% for s in items %}{% if not loop.first %}{{ loop.previtem.name }}{% endif %}{{ s.name }}{% endfor %}`, nil, same, 0},
		{"loop.changed", `{% for s in items %}{% if loop.changed(s.port) %}{{ s.name }}{% endif %}{% endfor %}`, nil, same, 0},
		{"the loop object passed", `{% macro m(l) %}{{ l.index }}{% endmacro %}{% for s in items %}{{ m(loop) }}{% endfor %}`, nil, same, 0},
		{"an inner loop's loop.index", `{% for s in items %}{% for p in s.pods %}{{ loop.index }}{{ p }}{% endfor %}{% endfor %}`, nil, same, 3},

		// What the body changes, or what changes between iterations.
		{"a namespace the body sets", `{% set ns = namespace(n=0) %}{% for s in items %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{% endfor %}{{ ns.n }}`, nil, same, 0},
		{"a namespace the body reads, changed", `{% set ns = namespace(p=other) %}{% for s in items %}{{ ns.p }}{{ s.name }}{% endfor %}`, nil, other, 0},
		{"a namespace the body reads, the same", `{% set ns = namespace(p=other) %}{% for s in items %}{{ ns.p }}{{ s.name }}{% endfor %}`, nil, same, 0},
		// A namespace is the template's own value, compared item by item: a body with a loop
		// of its own may read a few such values (ownSmall); the iteration that changes it is not
		// kept, those after it read its new value.
		{"a namespace the loop changes between iterations", `{% set ns = namespace(n=0) %}{% for s in items %}{{ ns.n }}{% for p in s.pods if p == "b-0" %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}`, nil, same, 2},
		{"a namespace the loop changes between iterations, changed", `{% set ns = namespace(n=0) %}{% for s in items %}{{ ns.n }}{% for p in s.pods if p == "b-0" %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}`, nil,
			func(v map[string]any) { v["items"].([]any)[1].(map[string]any)["pods"] = []any{"b-1"} }, 1},
		{"a namespace read by a body without a loop", `{% set ns = namespace(p=other) %}{% for s in items %}{{ ns.p }}{{ s.name }}{% endfor %}`, nil, same, 0},
		// The template's own values read by a body with a loop: compared item by item, deep.
		{"a dict the template made, read by a body with a loop", ownDict, nil, same, 3},
		{"a dict the template made, read by a body with a loop, changed", ownDict, nil, other, 0},
		{"rows the template made, one changed deep inside", ownRows, nil, edit, 2},
		{"rows the template made, a value deep inside each changed", ownRows, nil, other, 0},
		{"rows the template made, the same", ownRows, nil, same, 3},
		{"rows the template made, equal data made anew", ownRows, nil, func(v map[string]any) {
			v["items"] = []any{item("a", "1"), item("b", "2"), item("c", "3")}
		}, 3},
		{"a large list the template made", `{% set big = range(100)|list %}{% for s in items %}{% for p in s.pods %}{{ p }}{% endfor %}{{ big|length }}{% endfor %}`, nil, same, 0},
		{"a small list the body appends to in its loop", `{% set acc = [] %}{% for s in items %}{% for p in s.pods %}{% do acc.append(p) %}{% endfor %}{{ acc|length }}{% endfor %}`, nil, same, 0},
		{"a list the body changes deep inside", `{% set acc = [[other]] %}{% for s in items %}{% for p in s.pods %}{% do acc[0].append(p) %}{% endfor %}{{ acc[0]|length }}{% endfor %}`, nil, same, 0},
		{"a list the body appends to", `{% set acc = [] %}{% for s in items %}{{ acc.append(s.name) or "" }}{{ acc|length }}{% endfor %}{{ acc }}`, nil, same, 0},
		{"a dict the body updates", `{% set acc = {} %}{% for s in items %}{% do acc.update({s.name: 1}) %}{% endfor %}{{ acc|dictsort }}`, nil, same, 0},
		{"a set inside the body", `{% for s in items %}{% set x = s.name ~ "!" %}{{ x }}{% endfor %}`, nil, same, 3},
		{"a name set outside, read before the body sets it", `{% set x = other %}{% for s in items %}{{ x }}{% set x = s.name %}{{ x }}{% endfor %}`, nil, other, 0},
		{"a set in an if, read after", `{% set x = other %}{% for s in items %}{% if s.name == "b" %}{% set x = "B" %}{% endif %}{{ x }}{% endfor %}`, nil, other, 0},
		{"break", `{% for s in items %}{% if s.name == "b" %}{% break %}{% endif %}{{ s.name }}{% endfor %}.`, nil, same, 2},
		{"continue", `{% for s in items %}{% if s.name == "b" %}{% continue %}{% endif %}{{ s.name }}{% endfor %}.`, nil, same, 3},

		// Macros, caller(), cyclers: they read the state of the render; never kept.
		{"a macro of the template", `{% macro m(s) %}<{{ s.name }}{{ other }}>{% endmacro %}{% for s in items %}{{ m(s) }}{% endfor %}`, nil, other, 0},
		{"a macro defined in the body", `{% for s in items %}{% macro m() %}{{ s.name }}{% endmacro %}{{ m() }}{% endfor %}`, nil, same, 3},
		{"caller()", `{% macro wrap() %}{% for s in items %}[{{ caller(s) }}]{% endfor %}{% endmacro %}{% call(s) wrap() %}{{ s.name }}{{ other }}{% endcall %}`, nil, other, 0},
		{"a cycler", `{% set c = cycler("x", "y") %}{% for s in items %}{{ c.next() }}{{ s.name }}{% endfor %}`, nil, same, 0},
		{"a joiner", `{% set j = joiner(",") %}{% for s in items %}{{ j() }}{{ s.name }}{% endfor %}`, nil, same, 0},
		{"sameas", `{% for s in items %}{{ s is sameas other }}{% endfor %}`, nil, same, 0},

		// Other templates: their source may change apart from this one's.
		{"an include", `{% for s in items %}{% include "inc" %}{% endfor %}`, map[string]string{"inc": `{{ s.name }}`}, same, 0},
		{"an import", `{% for s in items %}{% import "inc" as i %}{{ s.name }}{% endfor %}`, map[string]string{"inc": ``}, same, 0},

		// Secret values: where they land in the output is kept with it.
		{"a secret printed", `{% for s in items %}{{ s.name|string }}={{ pw }};{% endfor %}`, nil, edit, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			srcs := map[string]string{"t": c.t}
			maps.Copy(srcs, c.srcs)
			p, err := Compile(srcs, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			render := func(vars map[string]any, mods *Modules) string {
				res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%s %v", res.Bytes, res.Secret)
			}
			got, n := reusedAfterChange(t, render, base, c.change, bodiesReused)
			if n != c.reused {
				t.Errorf("reused %d iterations, want %d (output %q)", n, c.reused, got)
			}
		})
	}
}

// Records equal to the kept ones but other objects (a snapshot made again) are the same
// reads; a record whose contents changed is not.
func TestLoopBodiesCompareRecordsByContents(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for name, pod in pods.items() %}{{ name|string }} {{ pod.status.podIP }}
{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods := func(ip string) *record.Record {
		m := map[string]any{}
		for _, n := range []string{"a", "b", "c"} {
			m[n] = record.Of(nil, map[string]any{"status": map[string]any{"podIP": "10.0.0." + n}})
		}
		m["b"] = record.Of(nil, map[string]any{"status": map[string]any{"podIP": ip}})
		return record.FromMap(nil, m)
	}
	var cache ModuleCache
	for i, c := range []struct {
		ip     string
		reused int
	}{{"10.0.0.1", 0}, {"10.0.0.1", 3}, {"10.0.0.2", 2}, {"10.0.0.2", 3}} {
		before := cache.BodiesReused()
		vars := map[string]any{"pods": pods(c.ip)}
		got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
		want, _ := p.Render(context.Background(), vars, Limits{}, nil)
		if string(got.Bytes) != string(want) {
			t.Errorf("render %d: %q, computed afresh %q", i, got.Bytes, want)
		}
		if n := cache.BodiesReused() - before; n != c.reused {
			t.Errorf("render %d: reused %d, want %d", i, n, c.reused)
		}
	}
}

// Iterations that served no render since the last sweep are forgotten once they are more
// than a sixteenth of the loop's; a loop that did not run is forgotten.
func TestLoopBodiesSweep(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% if items %}{% for s in items %}{{ s|string }}{% endfor %}{% endif %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	render := func(items ...any) {
		if _, err := p.RenderSharing(context.Background(), map[string]any{"items": items}, Limits{}, nil, &Modules{Across: &cache}, false); err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
	}
	var many []any
	for i := range 100 {
		many = append(many, int64(i))
	}
	render(many...)
	render(many[:50]...) // 50 unused: more than 100/16+16
	for _, lp := range cache.bodies.loops {
		if lp.n != 50 {
			t.Errorf("%d iterations kept, want 50", lp.n)
		}
	}
	render()
	if n := len(cache.bodies.loops); n != 0 {
		t.Errorf("%d loops kept after a render that ran none, want 0", n)
	}
}

// selectattr's and rejectattr's answers are kept per map of the data: a map that is the
// same object answers as it did; any other (another map, the same contents or not, a map
// added or deleted before it) is read. Every render is compared with one computed afresh.
func TestSelectattrAnswersKeptPerMap(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{{ items|selectattr("on")|map(attribute="n")|join(",") }};` +
		`{{ items|rejectattr("on")|map(attribute="n")|join(",") }};{{ items|selectattr("sub.on")|map(attribute="n")|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := func(n string, on bool) map[string]any {
		return map[string]any{"n": n, "on": on, "sub": map[string]any{"on": !on}}
	}
	a, b, c := m("a", true), m("b", false), m("c", true)
	var cache ModuleCache
	for i, items := range [][]any{
		{a, b, c},
		{a, b, c},
		{a, m("b", true), c},     // b's answer changed: another map
		{m("z", false), a, b, c}, // one added first
		{a, c},                   // one deleted
		{m("a", false), b, c},    // the same name, another answer
		{a, b, c, m("d", true), record.FromMap(nil, m("r", true))}, // a record: read
	} {
		vars := map[string]any{"items": items}
		got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
		want, err := p.Render(context.Background(), vars, Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes) != string(want) {
			t.Errorf("render %d: %q, computed afresh %q", i, got.Bytes, want)
		}
	}
}

// selectattr's and rejectattr's answers are kept per record of the data as per map (the
// snapshot's services are records): the same record answers as it did without being read;
// another record of the same contents is read. Every render is compared with one computed
// afresh.
func TestSelectattrAnswersKeptPerRecord(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{{ items|selectattr("on")|map(attribute="n")|join(",") }};` +
		`{{ items|rejectattr("on")|map(attribute="n")|join(",") }};{{ items|selectattr("sub.on")|map(attribute="n")|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := func(n string, on bool) *record.Record {
		return record.Of(nil, map[string]any{"n": n, "on": on, "sub": map[string]any{"on": !on}}).(*record.Record)
	}
	a, b, c := r("a", true), r("b", false), r("c", true)
	var cache ModuleCache
	for i, step := range []struct {
		items []any
		kept  int // answers given as kept: 3 calls, each item
	}{
		{[]any{a, b, c}, 0},
		{[]any{a, b, c}, 9},
		{[]any{a, r("b", false), c}, 6}, // b the same contents, another record: read
		{[]any{r("z", false), a, c}, 6}, // one added first
		{[]any{a, c}, 6},
		{[]any{r("a", false), c}, 3}, // the same name, another answer
	} {
		vars := map[string]any{"items": step.items}
		before := cache.bodies.selectKept
		got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
		if kept := cache.bodies.selectKept - before; kept != step.kept {
			t.Errorf("render %d: %d answers kept, want %d", i, kept, step.kept)
		}
		want, err := p.Render(context.Background(), vars, Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes) != string(want) {
			t.Errorf("render %d: %q, computed afresh %q", i, got.Bytes, want)
		}
	}
}

// Renders sharing one cache at the same time (a renderer is used concurrently) each render
// as computed afresh; run with -race.
func TestLoopBodiesConcurrentRenders(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for s in items if s.on %}{{ s.n }}{% endfor %};{{ items|selectattr("on")|map(attribute="n")|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	done := make(chan error)
	for g := range 4 {
		go func() {
			for i := range 50 {
				var items []any
				for j := range 20 {
					items = append(items, map[string]any{"n": fmt.Sprint(j), "on": (i+j+g)%3 == 0})
				}
				vars := map[string]any{"items": items}
				got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
				if err != nil {
					done <- err
					return
				}
				if i%10 == 0 {
					cache.Sweep()
				}
				want, _ := p.Render(context.Background(), vars, Limits{}, nil)
				if string(got.Bytes) != string(want) {
					done <- fmt.Errorf("%q, computed afresh %q", got.Bytes, want)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// The HTTPRoute example's model.j2 gathers every route's backends in one dict of its own,
// which each iteration of the loop over a route's backends reads: copied before the body ran,
// kept with the iteration and compared at the next render, that cost grew with the routes
// at each of them (3,000 routes: over the render's time budget). A body reading a dict, list
// or namespace the template made is not kept, and its loop is no longer tried. The loop inside
// the route's part (imported per route, kept whole for what it reads) keeps no iterations of
// its own.
func TestLoopBodiesGiveUpOnLargeOwnReads(t *testing.T) {
	const routes = 1500
	p, err := Compile(map[string]string{
		"t": `{% set backends = {} %}{% for r in routes %}{% import "route" as rt with context %}` +
			`{% for b in rt.rbackends %}{% do backends.setdefault(b[0], b[1]) %}{% endfor %}{% endfor %}` +
			`{{ backends|length }}`,
		// "shared" and the others: already in backends after the first route, so their
		// iterations change nothing and are kept (as the example's backends named by several
		// routes); four, as a loop inside another is kept from minNestedKept items.
		"route": `{% set names %}{% for port in r.ports %}{{ port }},{% endfor %}{% endset %}` +
			`{% set rbackends = [(r.name ~ names, {"p": 1}), ("shared", {"p": 2}), ("s2", {}), ("s3", {})] %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var items []any
	for i := range routes {
		items = append(items, map[string]any{"name": fmt.Sprint("r", i), "ports": []any{int64(80), int64(i)}})
	}
	vars := map[string]any{"routes": items}
	want, err := p.Render(context.Background(), vars, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	for i := range 2 {
		got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Bytes) != string(want) {
			t.Fatalf("render %d: %q, computed afresh %q", i, got.Bytes, want)
		}
		cache.Sweep()
		loops := map[string]*bodyLoop{}
		for key, lp := range cache.bodies.loops {
			loops[key.node.Target.Name] = lp
		}
		// (The second render takes every route's part kept: the loop inside does not run.)
		if lp := loops["port"]; i == 0 && lp != nil && lp.n != 0 {
			t.Errorf("the loop inside the route's part keeps %d iterations, want none", lp.n)
		}
		if lp := loops["b"]; i == 1 && lp == nil {
			t.Error("the loop over a route's backends is not in the cache")
		} else if i == 1 && (!lp.off || lp.n != 0) {
			t.Errorf("the loop over a route's backends keeps %d iterations (off: %v), want it off with none kept", lp.n, lp.off)
		}
	}
}

// A loop whose body reads something every render makes anew (the HTTPRoute example's loop
// over the backends reads the whole of `resources`) finds none of its iterations kept: after
// maxPoor such renders it is no longer tried. A loop of which one item changes per render (a
// pod's change in the default template) keeps being tried.
func TestLoopBodiesGiveUpWhenFewAreFound(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for s in items %}{{ s|string }}{{ all.gen }}{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		vars func(gen int) map[string]any
		off  bool
	}{
		{"what all iterations read changes", func(gen int) map[string]any {
			items := make([]any, 40)
			for i := range items {
				items[i] = int64(i)
			}
			return map[string]any{"items": items, "all": map[string]any{"gen": int64(gen)}}
		}, true},
		{"one item changes", func(gen int) map[string]any {
			items := make([]any, 40)
			for i := range items {
				items[i] = int64(i)
			}
			items[gen%40] = int64(1000 + gen)
			return map[string]any{"items": items, "all": map[string]any{"gen": int64(0)}}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cache ModuleCache
			for gen := range maxPoor + 2 {
				vars := c.vars(gen)
				got, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
				if err != nil {
					t.Fatal(err)
				}
				cache.Sweep()
				want, _ := p.Render(context.Background(), vars, Limits{}, nil)
				if string(got.Bytes) != string(want) {
					t.Fatalf("render %d: %q, computed afresh %q", gen, got.Bytes, want)
				}
			}
			for _, lp := range cache.bodies.loops {
				if lp.off != c.off {
					t.Errorf("the loop is off: %v, want %v (poor renders in a row: %d)", lp.off, c.off, lp.poor)
				}
			}
			if len(cache.bodies.loops) != 1 {
				t.Errorf("%d loops kept, want 1", len(cache.bodies.loops))
			}
		})
	}
}

// TestUsedInKeepsTheUsedOfAChain: a sweep keeps, of the iterations sharing a hash, those used
// in the generation, in their order (the first kept is found first), and drops the others.
func TestUsedInKeepsTheUsedOfAChain(t *testing.T) {
	for _, c := range []struct {
		used []uint64 // of the chain's entries, in order
		want []int    // the entries kept, by position
	}{
		{[]uint64{1}, []int{0}},
		{[]uint64{0}, nil},
		{[]uint64{1, 0, 1}, []int{0, 2}},
		{[]uint64{0, 1, 1, 0}, []int{1, 2}},
		{[]uint64{1, 1, 0, 0}, []int{0, 1}},
		{[]uint64{0, 0, 0}, nil},
	} {
		ents := make([]*bodyEntry, len(c.used))
		for i := range ents {
			ents[i] = &bodyEntry{used: c.used[i]}
			if i > 0 {
				ents[i-1].next = ents[i]
			}
		}
		var got []int
		for e := usedIn(ents[0], 1); e != nil; e = e.next {
			got = append(got, slices.Index(ents, e))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("used %v: kept %v, want %v", c.used, got, c.want)
		}
	}
}

// A name the body's frame does not name is looked up once per run (the frames around the loop
// do not change while it runs); the loop's own names at each iteration; another frame (another
// run) looks again.
func TestBodyRunLooksOuterNamesUpOnce(t *testing.T) {
	e := &evaluator{}
	outer := &frame{names: []string{"g"}, vals: []any{"g1"}}
	body := &frame{parent: outer, names: []string{"i"}, vals: []any{int64(1)}}
	r := &bodyRun{}
	read := func(f *frame) []any {
		return []any{r.lookup(e, f, 0, "g"), r.lookup(e, f, 1, "i"), r.lookup(e, f, 2, "missing")}
	}
	if got := read(body); got[0] != "g1" || got[1] != int64(1) || got[2] != (notSet{}) {
		t.Fatalf("first: %v", got)
	}
	outer.vals[0], body.vals[0] = "g2", int64(2) // (as no body does to the frames around it)
	if got := read(body); got[0] != "g1" || got[1] != int64(2) {
		t.Fatalf("second iteration: %v; want g1 (looked up once), 2", got)
	}
	again := &frame{parent: outer, names: []string{"i"}, vals: []any{int64(3)}}
	if got := read(again); got[0] != "g2" || got[1] != int64(3) {
		t.Fatalf("another run: %v; want g2, 3", got)
	}
}

// A loop inside another reads the outer one's name, which changes from run to run of the inner
// one: each render kept is the same as one computed afresh.
func TestLoopBodiesReadOuterNamesPerRun(t *testing.T) {
	p, err := Compile(map[string]string{
		// (The outer loop reads its loop object whole: its iterations are not kept, the inner
		// loop's are.)
		"t": `{% for o in outs %}{% set l = loop %}{% set m = o ~ "!" %}{% for i in ins %}{{ o }}{{ m }}{{ i }}{{ namespace(a=1).a }}{{ g }};{% endfor %}|{% endfor %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	for round, outs := range [][]any{{"a", "b", "c"}, {"a", "b", "c"}, {"c", "a", "d"}, {"d", "d", "a"}} {
		v := map[string]any{"outs": outs, "ins": []any{"1", "2", "3", "4", "5"}, "g": fmt.Sprint("g", round%2)}
		k.step(v, "render %d", round)
	}
	if k.cache.BodiesReused() == 0 {
		t.Error("no iteration reused")
	}
}

// A body that only prints text and what it reads by name, attribute or item (routes.map's
// `{{ e.key }} {{ e.backend }}`) is run at each render: keeping its iterations costs more
// than running them, and holds a copy of each one's output (4 MB at 10,000 Ingresses). Any
// other body is kept as before.
func TestPrintOnlyBodiesAreRunNotKept(t *testing.T) {
	for _, c := range []struct {
		body string
		kept bool
	}{
		{`{{ e.key }} {{ e.backend }}
`, false},
		{`{{ e["key"] }}:{{ e.backend }};{{ 7 }}`, false},
		{`{{ e.key|string }}`, true},                   // a filter
		{`{{ e.key ~ "/" }}`, true},                    // an expression
		{`{{ e[e.key] }}`, true},                       // an item by a read
		{`{% if e.key %}{{ e.key }}{% endif %}`, true}, // a statement
		{`{{ loop.index }}{{ e.key }}`, true},          // the loop's position: kept as before
	} {
		p, err := Compile(map[string]string{"t": "{% for e in items %}" + c.body + "{% endfor %}"}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		items := []any{map[string]any{"key": "a", "backend": "x"}, map[string]any{"key": "b", "backend": "y"}}
		vars := map[string]any{"items": items}
		var cache ModuleCache
		render := renderOf(t, p)
		render(vars, &Modules{Across: &cache})
		cache.Sweep()
		got := render(vars, &Modules{Across: &cache})
		want, err := p.Render(context.Background(), vars, Limits{}, nil)
		if err != nil || got != string(want) {
			t.Errorf("%s: %q, afresh %q (%v)", c.body, got, want, err)
		}
		if reused := cache.BodiesReused(); (reused == 2) != c.kept || reused != 0 && reused != 2 {
			t.Errorf("%s: %d iterations reused, kept %v", c.body, reused, c.kept)
		}
	}
}
