package jinja

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A module imported with context in a loop's body is kept per value of the names it reads:
// the next render takes it for the items whose reads are the same, and computes it for any
// other. Each case renders twice with the cache and compares the second render with a render
// computed afresh; "reused" is how many of the second render's imports took a kept module (a
// cache that compared less than everything a module reads fails the cases where fewer are).
func TestLoopImportsReuseOnlyWhatReadsTheSame(t *testing.T) {
	rec := func(name, port string) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "spec": map[string]any{"port": port}})
	}
	base := func() map[string]any {
		return map[string]any{"items": []any{rec("a", "1"), rec("b", "2"), rec("c", "3")},
			"env": map[string]any{"SUFFIX": "!"}, "other": "x"}
	}
	// The part: reads the item, a dict the template makes (shared), a namespace's attribute
	// (ns.prefix) and env; the template merges what it gives.
	part := `{% set line = shared.tag ~ ns.prefix ~ item.name ~ ":" ~ item.spec.port ~ env.SUFFIX %}{% set lines = [line] %}`
	main := `{% set shared = {"tag": "t-"} %}{% set ns = namespace(prefix="p-") %}{% set out = [] %}` +
		`{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
	for _, c := range []struct {
		name   string
		srcs   map[string]string // over the default ones
		change func(v map[string]any)
		reused int
	}{
		{name: "nothing changed", change: func(map[string]any) {}, reused: 3},
		{name: "equal records, other objects", change: func(v map[string]any) {
			v["items"] = []any{rec("a", "1"), rec("b", "2"), rec("c", "3")}
		}, reused: 3},
		{name: "one item changed", change: func(v map[string]any) {
			v["items"].([]any)[1] = rec("b", "20")
		}, reused: 2},
		{name: "an item added", change: func(v map[string]any) {
			v["items"] = append(v["items"].([]any), rec("d", "4"))
		}, reused: 3},
		{name: "a context value every part reads", change: func(v map[string]any) {
			v["env"] = map[string]any{"SUFFIX": "?"}
		}, reused: 0},
		{name: "a context value no part reads", change: func(v map[string]any) { v["other"] = "y" }, reused: 3},
		{name: "a dict the template makes, changed", srcs: map[string]string{"t": `{% set shared = {"tag": other} %}` + main[len(`{% set shared = {"tag": "t-"} %}`):]},
			change: func(v map[string]any) { v["other"] = "y" }, reused: 0},
		{name: "a namespace attribute, changed", srcs: map[string]string{"t": `{% set shared = {"tag": "t-"} %}{% set ns = namespace(prefix=other) %}` + main[len(`{% set shared = {"tag": "t-"} %}{% set ns = namespace(prefix="p-") %}`):]},
			change: func(v map[string]any) { v["other"] = "y" }, reused: 0},
		// What the template changes between two imports is read as it is at each import.
		{name: "a value the loop changes as it goes", srcs: map[string]string{
			"part": `{% set lines = [count.n ~ item.name] %}`,
			"t":    `{% set count = namespace(n=0) %}{% set out = [] %}{% for item in items %}{% if item.spec.port == "2" %}{% set count.n = count.n + 1 %}{% endif %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`},
			change: func(v map[string]any) { v["items"].([]any)[1] = rec("b", "20") }, reused: 1},
		// A part that changes what it was given, or gives it back, or reads the loop object, is
		// never kept.
		{name: "a part that changes what it reads", srcs: map[string]string{"part": `{% do shared.update({"n": item.name}) %}{% set lines = [shared.n] %}`},
			change: func(map[string]any) {}, reused: 0},
		{name: "a part that gives back what it reads", srcs: map[string]string{"part": `{% set lines = [item.name] %}{% set same = shared %}`,
			"t": `{% set shared = {"tag": "t-"} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do p.same.update({item.name: 1}) %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}{{ shared|dictsort }}`},
			change: func(map[string]any) {}, reused: 0},
		{name: "a part that reads the loop", srcs: map[string]string{"part": `{% set lines = [loop.index ~ item.name] %}`},
			change: func(map[string]any) {}, reused: 0},
		{name: "a part that imports another", srcs: map[string]string{"part": `{% import "other" as o %}{% set lines = [item.name] %}`, "other": ``},
			change: func(map[string]any) {}, reused: 0},
		{name: "a part that sets a namespace of the template", srcs: map[string]string{"part": `{% set ns.prefix = ns.prefix ~ "x" %}{% set lines = [ns.prefix ~ item.name] %}`},
			change: func(map[string]any) {}, reused: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			importsReused(t, map[string]string{"part": part, "t": main}, c.srcs, base, c.change, c.reused)
		})
	}
}

// Kept parts that served no render that imported their module since the last Sweep are
// forgotten; a render that imported none forgets nothing.
func TestLoopImportsSweep(t *testing.T) {
	p, err := Compile(map[string]string{"part": `{% set v = item %}`,
		"t": `{% for item in items %}{% import "part" as p with context %}{{ p.v }}{% endfor %}`}, "t", Options{})
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
	render("a", "b")
	render() // no import: nothing forgotten
	render("a", "b")
	render("a") // b forgotten
	render("a", "b")
	if got := cache.LoopReused(); got != 4 {
		t.Errorf("reused %d, want 4 (a and b, a, a)", got)
	}
	if n := len(cache.loop); n != 2 {
		t.Errorf("%d hashes kept, want 2", n)
	}
}

// A kept module is handed out itself (lent), not copied, to one render at a time: what that
// render changes in its values (through any method that changes a dict or a list, a
// namespace's attribute, in a value it holds, after the template stored it elsewhere) spoils
// it, and it serves no render after. Each case renders three times with the cache, the second
// time changing what the imports give (change true), and compares each render with one
// computed afresh; the third render must compute every part again.
func TestLentModulesChangedServeNoMore(t *testing.T) {
	rec := func(name string) *record.Record { return record.FromMap(nil, map[string]any{"name": name}) }
	part := `{% set lines = [item.name, "z"] %}{% set d = {"k": item.name, "inner": [1], "m": {"x": 1}} %}{% set ns = namespace(v=item.name) %}`
	for _, c := range []struct{ name, change string }{
		{"list append", `{% do p.lines.append("!") %}`},
		{"list extend", `{% do p.lines.extend(["!"]) %}`},
		{"list insert", `{% do p.lines.insert(0, "!") %}`},
		{"list pop", `{% do p.lines.pop() %}`},
		{"list remove", `{% do p.lines.remove("z") %}`},
		{"list clear", `{% do p.lines.clear() %}`},
		{"list reverse", `{% do p.lines.reverse() %}`},
		{"list sort", `{% do p.lines.sort(reverse=true) %}`},
		{"dict update", `{% do p.d.update({"k": "!"}) %}`},
		{"dict setdefault", `{% do p.d.setdefault("new", "!") %}`},
		{"dict pop", `{% do p.d.pop("k") %}`},
		{"dict popitem", `{% do p.d.popitem() %}`},
		{"dict clear", `{% do p.d.clear() %}`},
		{"a namespace's attribute", `{% set n = p.ns %}{% set n.v = "!" %}`},
		{"a list inside a dict", `{% do p.d.inner.append(2) %}`},
		{"a dict inside a dict", `{% do p.d.m.update({"y": 2}) %}`},
		{"stored by the template, changed later", `{% do acc.update({item.name: p.d}) %}{% do acc[item.name].update({"k": "!"}) %}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			main := `{% set acc = {} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}` +
				`{% if change %}` + c.change + `{% endif %}` +
				`{% do out.append(p.lines|join("+") ~ ":" ~ p.d|dictsort ~ ":" ~ p.ns.v) %}{% endfor %}{{ out|join(",") }}`
			p, err := Compile(map[string]string{"part": part, "t": main}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			// Twice the same item: the second import of a render takes a copy of the module
			// lent to the first, or computes it when the first changed it.
			for v, items := range [][]any{{rec("a"), rec("b"), rec("c")}, {rec("a"), rec("b"), rec("a")}} {
				k := newKeptRenders(t, renderOf(t, p))
				for i, change := range []bool{false, true, false} {
					before := k.cache.LoopReused()
					k.step(map[string]any{"items": items, "change": change}, "render %d", i+1)
					if n := k.cache.LoopReused() - before; i == 2 && v == 0 && n != 0 {
						t.Errorf("render 3 reused %d parts that the render before changed", n)
					}
				}
			}
		})
	}
}

// Renders that share a cache at the same time: a kept module is lent to one of them at a time,
// and what one changes in the module it has is never what another reads (go test -race).
func TestLentModulesConcurrentRenders(t *testing.T) {
	p, err := Compile(map[string]string{"part": `{% set lines = [item] %}`,
		"t": `{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do p.lines.append("!") %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"items": []any{"a", "b", "c", "a"}}
	want, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
				if err == nil && string(res.Bytes) != string(want.Bytes) {
					err = fmt.Errorf("%q, computed afresh %q", res.Bytes, want.Bytes)
				}
				if err != nil {
					errs <- err
					return
				}
				cache.Sweep()
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// freeVals finds, in one walk of the frames, what e.lookup finds for each name: the innermost
// frame's, the last of a frame's (a name set twice), the context's behind a frame's names,
// a built-in, or nothing (notSet).
func TestFreeValsAsLookup(t *testing.T) {
	root := &frame{ctx: map[string]any{"ctxonly": "c", "shadowed": "ctx", "range": "ctx-range"}}
	top := &frame{parent: root, names: []string{"shadowed", "twice", "outer", "twice"}, vals: []any{"top", 1, "o", 2}}
	body := &frame{parent: top, names: []string{"inner", "outer"}, vals: []any{"i", "body"}}
	names := []string{"inner", "outer", "shadowed", "twice", "ctxonly", "range", "namespace", "missing"}
	fi := freeInfo{names: names, index: map[string]int{}, ok: true}
	for i, n := range names {
		fi.index[n] = i
	}
	e := &evaluator{}
	for round := range 2 { // the second takes the slice the first gave back
		vals := e.freeVals(body, fi)
		for i, n := range names {
			want, ok := e.lookup(body, n)
			if !ok {
				want = notSet{}
			}
			if vals[i] != want {
				t.Errorf("round %d, %s: %#v, lookup finds %#v", round, n, vals[i], want)
			}
		}
		e.recycleVals(vals)
	}
}

// What imports in a loop found of a dict the template made and each of them reads (its hash,
// and that it is the same as a kept copy) serves the next imports only while it does not
// change: a change anywhere in it between two imports (the second and third read it after
// the first found it twice) is seen by the next import, as the render computed afresh shows.
func TestLoopImportsReadAChangedDictAfresh(t *testing.T) {
	rec := func(name string) *record.Record { return record.FromMap(nil, map[string]any{"name": name}) }
	part := `{% set lines = [item.name ~ ":" ~ shared.tag.v|join("") ~ shared.ns.x ~ shared.get("extra", [])|join("")] %}`
	for _, c := range []struct{ name, atC, atD string }{
		{"a list inside, appended to", `{% do shared.tag.v.append("x") %}`, ``},
		{"a list inside, emptied", `{% do shared.tag.v.clear() %}`, ``},
		{"a dict inside, updated", `{% do shared.tag.update({"v": ["y"]}) %}`, ``},
		{"a namespace inside, set", `{% set n = shared.ns %}{% set n.x = "m" %}`, ``},
		{"the dict, updated", `{% do shared.update({"extra": ["e"]}) %}`, ``},
		{"a list put in, then changed", `{% do shared.update({"extra": l}) %}`, `{% do l.append("z") %}`},
		{"a list inside, changed twice", `{% do shared.tag.v.append("x") %}`, `{% do shared.tag.v.append("w") %}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			main := `{% set l = [] %}{% set shared = {"tag": {"v": ["t"]}, "ns": namespace(x="n")} %}{% set out = [] %}{% for item in items %}` +
				`{% if change and item.name == "c" %}` + c.atC + `{% endif %}{% if change and item.name == "d" %}` + c.atD + `{% endif %}` +
				`{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`
			p, err := Compile(map[string]string{"part": part, "t": main}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			var cache ModuleCache
			vars := func(change bool) map[string]any {
				return map[string]any{"items": []any{rec("a"), rec("b"), rec("c"), rec("d")}, "change": change}
			}
			for i, change := range []bool{false, true, false, true} {
				res, err := p.RenderSharing(context.Background(), vars(change), Limits{}, nil, &Modules{Across: &cache}, false)
				if err != nil {
					t.Fatal(err)
				}
				cache.Sweep()
				want, err := p.RenderSharing(context.Background(), vars(change), Limits{}, nil, nil, false)
				if err != nil {
					t.Fatal(err)
				}
				if string(res.Bytes) != string(want.Bytes) {
					t.Errorf("render %d: %q, computed afresh %q", i+1, res.Bytes, want.Bytes)
				}
			}
		})
	}
}

// A dict the imports read that holds the values of a module lent to the render (here each
// item's part's list, gathered in acc) is not taken over by what the imports found of it: a
// change of such a value still spoils the lent module, which serves no render after.
func TestLoopImportsReadWhatALentModuleHolds(t *testing.T) {
	rec := func(name string) *record.Record { return record.FromMap(nil, map[string]any{"name": name}) }
	srcs := map[string]string{
		"part":   `{% set lines = [item.name] %}`,
		"reader": `{% set n = acc|length %}`,
		"t": `{% set acc = {} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do acc.update({item.name: p.lines}) %}` +
			`{% import "reader" as r with context %}{% do out.append(r.n) %}{% endfor %}` +
			`{% if change %}{% do acc.a.append("!") %}{% endif %}{% for k, v in acc|dictsort %}{{ k }}={{ v|join("+") }} {% endfor %}{{ out|join(",") }}`,
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	vars := func(change bool) map[string]any {
		return map[string]any{"items": []any{rec("a"), rec("b"), rec("c"), rec("d")}, "change": change}
	}
	for i, change := range []bool{false, true, false} {
		res, err := p.RenderSharing(context.Background(), vars(change), Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
		want, err := p.RenderSharing(context.Background(), vars(change), Limits{}, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Bytes) != string(want.Bytes) {
			t.Errorf("render %d: %q, computed afresh %q", i+1, res.Bytes, want.Bytes)
		}
	}
}

// A render apart (a test in the config) takes the parts the other renders kept and leaves
// them as they were: the parts it did not take are not forgotten, the module kept whole at the
// template's top stays the other renders'; the parts it made serve the renders apart after it,
// and are forgotten at the next Sweep unless the render that Sweep ends took them.
func TestLoopImportsApart(t *testing.T) {
	p, err := Compile(map[string]string{"part": `{% set v = item ~ "." %}`,
		"model": `{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.append(p.v) %}{% endfor %}`,
		"t":     `{% import "model" as m with context %}{{ m.out|join }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	render := func(apart bool, items ...any) (reused int) {
		t.Helper()
		before := cache.LoopReused() + cache.Reused()
		vars := map[string]any{"items": items}
		res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache, Apart: apart}, false)
		if err != nil {
			t.Fatal(err)
		}
		if want, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, nil, false); err != nil || string(res.Bytes) != string(want.Bytes) {
			t.Errorf("%v: %q, computed afresh %q (%v)", items, res.Bytes, want.Bytes, err)
		}
		if apart {
			cache.EndApart()
		} else {
			cache.Sweep()
		}
		return cache.LoopReused() + cache.Reused() - before
	}
	render(false, "a", "b")
	if n := render(true, "x"); n != 0 {
		t.Errorf("the first render apart reused %d, want 0", n)
	}
	if n := render(true, "a", "b", "x"); n != 3 {
		t.Errorf("a render apart after it reused %d, want 3 (a and b of the render before, x of the render apart)", n)
	}
	if n := render(false, "a", "b"); n != 1 {
		t.Errorf("the next render reused %d modules, want 1: the model whole", n)
	}
	if n := render(false, "a", "b", "y"); n != 2 {
		t.Errorf("reused %d, want 2: a and b", n)
	}
	if n := len(cache.loop); n != 3 {
		t.Errorf("%d hashes kept, want 3: a, b and y (x, made apart and taken by no render since, forgotten)", n)
	}
}

// An import in a loop looks first at the module the import at the same place of the last
// render had, and takes it only when it read the same: an item added first shifts the places,
// which the first module found by hash puts right; an item changed is computed again. Each
// render is compared with one computed afresh.
func TestLoopImportsLookAtTheSamePlaceFirst(t *testing.T) {
	rec := func(name, port string) *record.Record {
		return record.FromMap(nil, map[string]any{"name": name, "spec": map[string]any{"port": port}})
	}
	items := func(names ...string) []any {
		out := []any{}
		for _, n := range names {
			out = append(out, rec(n, "80"))
		}
		return out
	}
	p, err := Compile(map[string]string{"part": `{% set lines = [item.name ~ ":" ~ item.spec.port] %}`,
		"t": `{% set out = [] %}{% for item in items %}{% import "part" as p with context %}{% do out.extend(p.lines) %}{% endfor %}{{ out|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	changed := items("z", "a", "b", "c", "d", "e", "f", "g", "h")
	changed[5] = rec("e", "81")
	for i, step := range []struct {
		items          []any
		reused, hinted int
	}{
		{items("a", "b", "c", "d", "e", "f", "g", "h"), 0, 0},
		{items("a", "b", "c", "d", "e", "f", "g", "h"), 8, 8},
		// z computed; a found by hash (at place 1, kept at 0); b, c, d at the place after it;
		// e's port changed: computed; f, g, h.
		{changed, 7, 6},
	} {
		reused, hinted := cache.LoopReused(), cache.LoopHinted()
		vars := map[string]any{"items": step.items}
		res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, &Modules{Across: &cache}, false)
		if err != nil {
			t.Fatal(err)
		}
		cache.Sweep()
		want, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Bytes) != string(want.Bytes) {
			t.Errorf("render %d: %q, computed afresh %q", i, res.Bytes, want.Bytes)
		}
		if r, h := cache.LoopReused()-reused, cache.LoopHinted()-hinted; r != step.reused || h != step.hinted {
			t.Errorf("render %d: %d imports reused, %d at the same place; want %d, %d", i, r, h, step.reused, step.hinted)
		}
	}
}

// reusedAfterChange renders base() with cache, then base() after change, each checked against
// a render computed afresh (render with no Modules); it returns the second output and how much
// count grew over that render.
func reusedAfterChange(t *testing.T, render func(map[string]any, *Modules) string, base func() map[string]any, change func(map[string]any), count func(*ModuleCache) int) (string, int) {
	t.Helper()
	var cache ModuleCache
	if first, want := render(base(), &Modules{Across: &cache}), render(base(), nil); first != want {
		t.Fatalf("first render %q, computed afresh %q", first, want)
	}
	cache.Sweep()
	before := count(&cache)
	next := base()
	change(next)
	got := render(next, &Modules{Across: &cache})
	if want := render(next, nil); got != want {
		t.Errorf("%q, computed afresh %q", got, want)
	}
	return got, count(&cache) - before
}

// importsReused compiles srcs (over them: over, "t" the template), renders base then base
// changed with one cache, and fails t unless the second render took want kept imports.
func importsReused(t *testing.T, srcs, over map[string]string, base func() map[string]any, change func(map[string]any), want int) {
	t.Helper()
	for k, v := range over {
		srcs[k] = v
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, n := reusedAfterChange(t, renderOf(t, p), base, change, loopReused); n != want {
		t.Errorf("reused %d imports, want %d (output %q)", n, want, got)
	}
}

// renderOf renders p, failing t on an error.
func renderOf(t *testing.T, p *Program) func(map[string]any, *Modules) string {
	return func(vars map[string]any, mods *Modules) string {
		res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Bytes)
	}
}

func loopReused(c *ModuleCache) int   { return c.LoopReused() }
func bodiesReused(c *ModuleCache) int { return c.BodiesReused() }

// A part that reads a block of records holding more values in all than one import may hash
// (maxHashed) is kept all the same: each record's contents are hashed once, against a budget
// of their own (the Ingress example reads its Ingresses in blocks of 64).
func TestLoopImportsOfLargeBlocksOfRecordsAreKept(t *testing.T) {
	rec := func(i int) *record.Record {
		var values []any
		for j := range 100 {
			values = append(values, fmt.Sprint(j))
		}
		return record.FromMap(nil, map[string]any{"name": fmt.Sprintf("r%d", i), "values": values})
	}
	base := func() map[string]any {
		var items []any
		for i := range 128 {
			items = append(items, rec(i))
		}
		return map[string]any{"items": items}
	}
	p, err := Compile(map[string]string{
		"part": `{% set names = [] %}{% for r in block %}{% do names.append(r.name ~ "=" ~ r["values"]|length) %}{% endfor %}`,
		"t":    `{% for block in items|batch(64) %}{% import "part" as p with context %}{{ p.names|join(",") }};{% endfor %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Equal records, other objects: each block's part is found by its records' contents.
	_, reused := reusedAfterChange(t, renderOf(t, p), base, func(v map[string]any) { v["items"] = base()["items"] }, loopReused)
	if reused != 2 {
		t.Errorf("%d of 2 blocks' parts reused", reused)
	}
	_, reused = reusedAfterChange(t, renderOf(t, p), base, func(v map[string]any) { v["items"].([]any)[70] = rec(700) }, loopReused)
	if reused != 1 {
		t.Errorf("one record of the second block changed: %d of 2 blocks' parts reused, want 1", reused)
	}
}

// A module imported in a loop is kept as the render made it: a change of its values by that
// render after the import (every way there is) leaves a copy of it as it was in its place, so
// that the next render takes it unchanged, and takes it again (a render that changes nothing).
func TestLoopImportKeptAsMadeChangedByItsRender(t *testing.T) {
	part := `{% set lines = [item, "z"] %}{% set d = {"k": item, "inner": [1], "m": {"x": 1}} %}{% set ns = namespace(v=item) %}`
	for _, c := range []struct{ name, change string }{
		{"list append", `{% do p.lines.append("!") %}`},
		{"list sort", `{% do p.lines.sort(reverse=true) %}`},
		{"dict update", `{% do p.d.update({"k": "!"}) %}`},
		{"dict pop", `{% do p.d.pop("k") %}`},
		{"a namespace's attribute", `{% set n = p.ns %}{% set n.v = "!" %}`},
		{"a list inside a dict", `{% do p.d.inner.append(2) %}`},
		{"a dict inside a dict", `{% do p.d.m.update({"y": 2}) %}`},
		{"stored by the template, changed later", `{% do acc.update({item: p.d}) %}{% do acc[item].update({"k": "!"}) %}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			main := `{% set acc = {} %}{% set out = [] %}{% for item in items %}{% import "part" as p with context %}` +
				`{% do out.append(p.lines|join("+") ~ ":" ~ p.d|dictsort ~ ":" ~ p.ns.v) %}` +
				`{% if change %}` + c.change + `{% endif %}{% endfor %}{{ out|join(",") }}`
			p, err := Compile(map[string]string{"part": part, "t": main}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := newKeptRenders(t, renderOf(t, p))
			for i, change := range []bool{true, false, false} {
				vars := map[string]any{"items": []any{"a", "b"}, "change": change}
				before := k.cache.LoopReused()
				k.step(vars, "render %d", i+1)
				if n := k.cache.LoopReused() - before; n != []int{0, 2, 2}[i] {
					t.Errorf("render %d reused %d parts, want %d", i+1, n, []int{0, 2, 2}[i])
				}
			}
		})
	}
}

// Sweep keeps a module version that served or was made since the last Sweep, or whose module
// was not imported since (its importer kept whole); it forgets the others of a module imported
// since, those made apart and those spoiled. The modules' versions are interleaved in a list
// and spread over lists, as imports of two modules read values of the same hash.
func TestSweepKeepsWhatServedOrWasNotImported(t *testing.T) {
	const gen = 7
	entry := func(name string, used uint64) *loopEntry {
		return &loopEntry{mod: &module{name: name}, used: used}
	}
	apart, spoiled := entry("b", gen), entry("b", gen)
	apart.apart = true
	spoiled.spoiled.Store(true)
	served, unusedA, unusedB, unusedEmpty := entry("a", gen), entry("a", gen-1), entry("b", gen-3), entry("", gen-1)
	servedB, unusedA2 := entry("b", gen), entry("a", gen-2)
	c := &ModuleCache{
		gen:     gen,
		touched: map[string]bool{"a": true, "": true},
		loop: map[uint64][]*loopEntry{
			1: {served, unusedB, unusedA, apart, spoiled, unusedEmpty},
			2: {unusedA2},
			3: {servedB, unusedB},
		},
	}
	c.Sweep()
	want := map[uint64][]*loopEntry{1: {served, unusedB}, 3: {servedB, unusedB}}
	if len(c.loop) != len(want) {
		t.Errorf("%d lists kept, want %d", len(c.loop), len(want))
	}
	for h, w := range want {
		if !slices.Equal(c.loop[h], w) {
			t.Errorf("list %d kept %v, want %v", h, entryNames(c.loop[h]), entryNames(w))
		}
	}
	if c.gen != gen+1 || len(c.touched) != 0 {
		t.Errorf("after the sweep: generation %d, touched %v", c.gen, c.touched)
	}
	// The first name looked up may be "": it is looked up too.
	c = &ModuleCache{gen: gen, touched: map[string]bool{"": true}, loop: map[uint64][]*loopEntry{1: {entry("", gen-1)}}}
	if c.Sweep(); len(c.loop) != 0 {
		t.Errorf("an unused version of a module imported since (named \"\") kept: %v", entryNames(c.loop[1]))
	}
}

// entryNames are the module names of entries, with their generations.
func entryNames(list []*loopEntry) []string {
	var out []string
	for _, le := range list {
		out = append(out, fmt.Sprintf("%q@%d", le.mod.name, le.used))
	}
	return out
}
