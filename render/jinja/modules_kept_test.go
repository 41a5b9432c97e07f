package jinja

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// keptModuleSrc is a module kept for the next render whose values a template can change every
// way there is: a list, a dict holding a list and a dict, a namespace, and macros that change
// them or call a caller with them.
const keptModuleSrc = `{% set lines = [] %}{% set d = {"k": "v", "inner": [1], "m": {"x": 1}} %}{% set ns = namespace(v="n") %}` +
	`{% for s in services %}{% do lines.append(s.name) %}{% endfor %}` +
	`{% macro push(x) %}{% do lines.append(x) %}{% endmacro %}` +
	`{% macro each() %}{% for l in lines %}{{ caller(l) }}{% endfor %}{% endmacro %}`

// keptModuleShow prints every value of the module imported as r.
const keptModuleShow = `{{ r.lines|join("+") }}:{{ r.d.get("k") }}:{{ r.d.get("inner", [])|join("+") }}:{{ r.d.get("m", {})|dictsort }}:{{ r.ns.v }}:{{ r.d|length }}`

// keptModuleChanges are the ways a template changes the values of the module imported as r.
var keptModuleChanges = []struct{ name, change string }{
	{"list append", `{% do r.lines.append("!") %}`},
	{"list extend", `{% do r.lines.extend(["!"]) %}`},
	{"list insert", `{% do r.lines.insert(0, "!") %}`},
	{"list pop", `{% do r.lines.pop() %}`},
	{"list remove", `{% do r.lines.remove("a") %}`},
	{"list clear", `{% do r.lines.clear() %}`},
	{"list reverse", `{% do r.lines.reverse() %}`},
	{"list sort", `{% do r.lines.sort(reverse=true) %}`},
	{"dict update", `{% do r.d.update({"k": "!"}) %}`},
	{"dict setdefault", `{% do r.d.setdefault("new", "!") %}`},
	{"dict pop", `{% do r.d.pop("k") %}`},
	{"dict popitem", `{% do r.d.popitem() %}`},
	{"dict clear", `{% do r.d.clear() %}`},
	{"a namespace's attribute", `{% set n = r.ns %}{% set n.v = "!" %}`},
	{"a list inside a dict", `{% do r.d.inner.append(2) %}`},
	{"a dict inside a dict", `{% do r.d.m.update({"y": 2}) %}`},
	{"a macro of the module", `{{ r.push("!") }}`},
	{"a caller", `{% call(l) r.each() %}{% do r.d.update({"k": l}) %}{% endcall %}`},
	{"stored by the template, changed later", `{% set acc = {"x": r.d} %}{% do acc.x.inner.append(3) %}`},
}

// A template that changes a value of the module kept for the next render, lent to it, never
// shows that change to another file's import, to the next render, or in the module kept: each
// file renders as it does on its own, whether the file that changes it comes first, in the
// middle or last, in every render.
func TestKeptModuleChangedNeverSeenElsewhere(t *testing.T) {
	vars := func() map[string]any {
		return map[string]any{"services": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	}
	for _, c := range keptModuleChanges {
		t.Run(c.name, func(t *testing.T) {
			srcs := map[string]string{
				"m": keptModuleSrc,
				"w": `{% import "m" as r with context %}` + c.change + keptModuleShow,
				"x": `{% import "m" as r with context %}` + keptModuleShow,
				"y": `{% import "m" as r with context %}{% call(l) r.each() %}[{{ l }}]{% endcall %}` + keptModuleShow,
			}
			for _, mains := range [][]string{{"w", "x", "y"}, {"x", "w", "y"}, {"x", "y", "w"}} {
				alone := renderFiles(t, srcs, mains, vars(), nil)
				var cache ModuleCache
				for r := range 3 {
					// The last render leaves the writer out: the module kept must be as computed.
					files := mains
					if r == 2 {
						files = []string{"x", "y"}
					}
					got := renderFiles(t, srcs, files, vars(), &Modules{Across: &cache})
					for i, out := range got {
						want := alone[slices.Index(mains, files[i])]
						if out != want {
							t.Errorf("order %v, render %d, %s: %q sharing the kept module, %q alone", mains, r+1, files[i], out, want)
						}
					}
					if k := cache.m["m"]; k == nil || k.spoiled.Load() || k.holder != nil {
						t.Errorf("order %v, render %d: the module kept is one a template changed, or is still lent", mains, r+1)
					}
				}
				if got := cache.Reused(); got != 2 {
					t.Errorf("order %v: the kept module served %d renders, want 2", mains, got)
				}
			}
		})
	}
}

// One copy of a module kept for the next render is all there is: the module the render
// computed is kept as it is, and the files of a render and the next renders share its values
// (the same list, printed by its address) rather than each import having a copy; a template
// that changes them has them to itself, and the others share the copy taken as they were.
func TestKeptModuleIsOneCopy(t *testing.T) {
	addr := map[string]Filter{"addr": func(v any, _ []any, _ map[string]any) (any, error) { return fmt.Sprintf("%p", v), nil }}
	srcs := map[string]string{
		"m": keptModuleSrc,
		"a": `{% import "m" as r with context %}{{ r.lines|addr }} {{ r.d.inner|addr }}`,
		"b": `{% import "m" as r with context %}{{ r.lines|addr }} {{ r.d.inner|addr }}`,
		"w": `{% import "m" as r with context %}{% do r.lines.append("!") %}{{ r.lines|addr }} {{ r.d.inner|addr }}`,
	}
	vars := func() map[string]any { return map[string]any{"services": []any{map[string]any{"name": "a"}}} }
	var cache ModuleCache
	render := func(main string) string {
		p, err := Compile(srcs, main, Options{Filters: addr})
		if err != nil {
			t.Fatal(err)
		}
		return render1(t, p, vars(), &Modules{Across: &cache})
	}
	first := render("a") // computed, and kept as it is
	lines, _ := cache.m["m"].mod.vars.getStr("lines")
	d, _ := cache.m["m"].mod.vars.getStr("d")
	inner, _ := d.(*Dict).getStr("inner")
	kept := fmt.Sprintf("%p %p", lines, inner)
	if first != kept {
		t.Errorf("the render that computed the module printed values at %s, the kept module's are at %s: a copy was kept", first, kept)
	}
	for i, main := range []string{"a", "b", "a", "b"} {
		if got := render(main); got != kept {
			t.Errorf("render %d (%s): values at %s, the kept module's at %s: a copy was made", i+2, main, got, kept)
		}
	}
	if got := render("w"); got != kept {
		t.Errorf("the render that changes the module: values at %s, want the kept ones it was lent (%s)", got, kept)
	}
	again := render("a")
	if again == kept {
		t.Errorf("after a template changed the kept module, the next render still shares it (%s)", again)
	}
	if got := render("b"); got != again {
		t.Errorf("the copy that took the changed module's place is not shared: %s, then %s", again, got)
	}
}

func render1(t *testing.T, p *Program, vars map[string]any, mods *Modules) string {
	t.Helper()
	res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Bytes)
}

// Renders that share a ModuleCache at the same time (a render apart beside a sync's): the kept
// module is lent to one at a time, and what one changes is never what another reads
// (go test -race); each renders as it does on its own.
func TestKeptModuleConcurrentRenders(t *testing.T) {
	srcs := map[string]string{
		"m": keptModuleSrc,
		"w": `{% import "m" as r with context %}{% do r.lines.append("!") %}{% do r.d.inner.append(2) %}` + keptModuleShow,
		"x": `{% import "m" as r with context %}` + keptModuleShow,
	}
	vars := map[string]any{"services": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	alone := renderFiles(t, srcs, []string{"w", "x"}, vars, nil)
	var cache ModuleCache
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				mods := &Modules{Across: &cache, Apart: g%2 == 1}
				for i, main := range []string{"w", "x"} {
					p, err := Compile(srcs, main, Options{})
					if err != nil {
						errs <- err.Error()
						return
					}
					res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
					if err != nil {
						errs <- err.Error()
						return
					}
					if string(res.Bytes) != alone[i] {
						errs <- fmt.Sprintf("%s: %q, alone %q", main, res.Bytes, alone[i])
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A module that holds values of a part imported in a loop (kept, and lent to the renders,
// which may change it) is kept as it is, as the part's dependent: the next render that reads
// it takes it itself, not a copy. A render that changes the part spoils the module too, before
// the change is made: the renders after it take a copy of the module as it was, and never see
// what was done to the part.
func TestKeptModuleHoldingLentValuesDependsOnThem(t *testing.T) {
	addr := map[string]Filter{"addr": func(v any, _ []any, _ map[string]any) (any, error) { return fmt.Sprintf("%p", v), nil }}
	srcs := map[string]string{
		"part": `{% set lines = [item] %}`,
		"m":    `{% set all = [] %}{% for item in items %}{% import "part" as p with context %}{% do all.append(p.lines) %}{% endfor %}`,
		"a":    `{% import "m" as r with context %}{{ r.all|addr }} {% for l in r.all %}{{ l|join }}{% endfor %}`,
		"w":    `{% for item in items %}{% import "part" as p with context %}{% do p.lines.append("!") %}{% endfor %}`,
	}
	var cache ModuleCache
	render := func(main string, items []any) string {
		p, err := Compile(srcs, main, Options{Filters: addr})
		if err != nil {
			t.Fatal(err)
		}
		out := render1(t, p, map[string]any{"items": items}, &Modules{Across: &cache})
		cache.Sweep()
		return out
	}
	render("a", []any{"x", "y"})
	// The parts are kept now: the next computation of m (another item) is lent them.
	got := render("a", []any{"x", "y", "z"})
	kept, _ := cache.m["m"].mod.vars.getStr("all")
	want := fmt.Sprintf("%p xyz", kept)
	if got != want {
		t.Errorf("the module holding lent parts was not kept as it is: %s, want %s", got, want)
	}
	if again := render("a", []any{"x", "y", "z"}); again != want {
		t.Errorf("the next render: %s, want the module kept itself (%s)", again, want)
	}
	render("w", []any{"x", "y"}) // lent the parts, and changes them
	got = render("a", []any{"x", "y", "z"})
	if !strings.HasSuffix(got, " xyz") || got == want {
		t.Errorf("after another render changed the parts: %q, want a copy of the module as it was (xyz), not the module itself (%s)", got, want)
	}
}

// A render apart (a test in the config, beside the syncs' renders) is never lent a part that a
// kept module holds as it is, nor that module while a part it holds is lent to another render:
// it works on copies, so that what it changes neither shows in nor spoils what the syncs keep,
// and it may run while a sync's render reads or changes them (go test -race).
func TestRenderApartCopiesWhatAKeptModuleHolds(t *testing.T) {
	addr := map[string]Filter{"addr": func(v any, _ []any, _ map[string]any) (any, error) { return fmt.Sprintf("%p", v), nil }}
	srcs := map[string]string{
		"part": `{% set lines = [item] %}`,
		"m":    `{% set all = [] %}{% for item in items %}{% import "part" as p with context %}{% do all.append(p.lines) %}{% endfor %}`,
		"a":    `{% import "m" as r with context %}{{ r.all|addr }} {% for l in r.all %}{{ l|join }}{% endfor %}`,
		"w":    `{% for item in items %}{% import "part" as p with context %}{% do p.lines.append("!") %}{% endfor %}{% import "m" as r with context %}{% do r.all.append(["?"]) %}{% for l in r.all %}{{ l|join }}{% endfor %}`,
	}
	progs := map[string]*Program{}
	for _, main := range []string{"a", "w"} {
		p, err := Compile(srcs, main, Options{Filters: addr})
		if err != nil {
			t.Fatal(err)
		}
		progs[main] = p
	}
	var cache ModuleCache
	syncRender := func(items []any) string {
		out := render1(t, progs["a"], map[string]any{"items": items}, &Modules{Across: &cache})
		cache.Sweep()
		return out
	}
	apart := func(items []any) string {
		out := render1(t, progs["w"], map[string]any{"items": items}, &Modules{Across: &cache, Apart: true})
		cache.EndApart()
		return out
	}
	xyz := []any{"x", "y", "z"}
	syncRender([]any{"x", "y"})
	want := syncRender(xyz) // m computed again, kept as it is, holding the parts
	if got := apart(xyz); got != "xyz?" {
		t.Fatalf("the render apart: %q, want xyz? (as a fresh render: each import its own module)", got)
	}
	if got := syncRender(xyz); got != want {
		t.Fatalf("after a render apart changed its parts and its m: %q, want the module kept itself, unchanged (%s)", got, want)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			if got := apart(xyz); got != "xyz?" {
				t.Errorf("a render apart: %q", got)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		items, text := xyz, "xyz"
		if i%3 == 0 {
			items, text = []any{"x", "y", "z", fmt.Sprint(i)}, fmt.Sprint("xyz", i)
		}
		if got := syncRender(items); !strings.HasSuffix(got, " "+text) {
			t.Errorf("a sync's render: %q", got)
		}
	}
	wg.Wait()
}

// A kept module no longer kept (computed again: what it read changed) leaves the parts it held:
// none of them keeps it as a dependent, so that it, and its module, can be collected (they
// were kept alive by every part they had held, one more module at each sync).
func TestKeptModuleNoLongerKeptLeavesItsParts(t *testing.T) {
	srcs := map[string]string{
		"part": `{% set lines = [item] %}`,
		"m":    `{% set all = [] %}{% for item in items %}{% import "part" as p with context %}{% do all.append(p.lines) %}{% endfor %}{% set n = n %}`,
		"a":    `{% import "m" as r with context %}{% for l in r.all %}{{ l|join }}{% endfor %}`,
	}
	p, err := Compile(srcs, "a", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cache ModuleCache
	for i := range 50 {
		// n changes at each render: m is computed again, its parts lent as they were.
		if got := render1(t, p, map[string]any{"items": []any{"x", "y"}, "n": int64(i)}, &Modules{Across: &cache}); got != "xy" {
			t.Fatalf("render %d: %q", i, got)
		}
		cache.Sweep()
	}
	parts := 0
	for _, list := range cache.loop {
		for _, le := range list {
			parts++
			le.mu.Lock()
			n := len(le.deps)
			le.mu.Unlock()
			if n > 2 {
				t.Errorf("a part has %d dependents after 50 renders, want the module kept now (and at most the one before)", n)
			}
		}
	}
	if parts != 2 {
		t.Fatalf("%d parts kept, want 2", parts)
	}
	if k := cache.m["m"]; k == nil || len(k.depOn) != 2 {
		t.Fatalf("the module kept: %v, want one holding the 2 parts", k)
	}
}

// A module kept for the next render that merged the values of modules imported in its loop (the
// Ingress example's routes and their blocks' parts) holds the parts' kept values themselves,
// from the first render on: the parts are kept as that render made them, not a copy beside the
// values the module took. A render that changes a part's value spoils both, before the change:
// the next renders are still those of a fresh render.
func TestKeptModuleSharesItsPartsFromTheFirstRender(t *testing.T) {
	srcs := map[string]string{
		"part": `{% set d = {"k": item} %}{% set lines = [item] %}`,
		"m": `{% set all = {} %}{% set ls = [] %}{% for item in items %}{% import "part" as p with context %}` +
			`{% do all.update({item: p.d}) %}{% do ls.append(p.lines) %}{% endfor %}`,
		"a": `{% import "m" as r with context %}{% for k, v in r.all|dictsort %}{{ k }}={{ v.k }};{% endfor %}{{ r.ls|map("join")|join }}`,
		"w": `{% for item in items %}{% import "part" as p with context %}{% do p.d.update({"k": "!"}) %}{% do p.lines.append("!") %}{% endfor %}`,
		"c": `{% import "m" as r with context %}{% do r.all.x.update({"k": "!"}) %}{% do r.ls[1].append("!") %}{{ r.all.x.k }}{{ r.ls|map("join")|join }}`,
	}
	progs := map[string]*Program{}
	for _, main := range []string{"a", "w", "c"} {
		p, err := Compile(srcs, main, Options{})
		if err != nil {
			t.Fatal(err)
		}
		progs[main] = p
	}
	var cache ModuleCache
	vars := map[string]any{"items": []any{"x", "y"}}
	render := func(main string) string {
		out := render1(t, progs[main], vars, &Modules{Across: &cache})
		cache.Sweep()
		return out
	}
	want := render1(t, progs["a"], vars, nil)
	if got := render("a"); got != want {
		t.Fatalf("first render: %q, want %q", got, want)
	}
	// The parts' values, as kept.
	parts := map[any]bool{}
	for _, list := range cache.loop {
		for _, le := range list {
			if le.spoiled.Load() || le.holder != nil {
				t.Fatalf("a part kept spoiled (%v) or still lent (%v)", le.spoiled.Load(), le.holder != nil)
			}
			for _, name := range []string{"d", "lines"} {
				v, _ := le.mod.vars.getStr(name)
				parts[v] = true
			}
		}
	}
	k := cache.m["m"]
	if k == nil || len(parts) != 4 {
		t.Fatalf("kept: the module %v, %d parts' values, want the module and 4", k, len(parts))
	}
	all, _ := k.mod.vars.getStr("all")
	ls, _ := k.mod.vars.getStr("ls")
	held := append(slices.Clone(all.(*Dict).vals), ls.(*List).items...)
	for _, v := range held {
		if !parts[v] {
			t.Fatalf("the module kept holds %v, not a part's kept value: a copy", v)
		}
	}
	if len(k.depOn) != 2 {
		t.Fatalf("the module kept depends on %d parts, want 2", len(k.depOn))
	}
	if got := render("a"); got != want {
		t.Fatalf("second render: %q, want %q", got, want)
	}
	render("w") // lent the parts, and changes them
	if !k.spoiled.Load() {
		t.Fatalf("a part changed, the module holding its values not spoiled")
	}
	for range 2 {
		if got := render("a"); got != want {
			t.Fatalf("after a render changed the parts: %q, want %q", got, want)
		}
	}
	// The render that made the parts and the module changes them, through the module: the
	// next renders take both as they were.
	cache = ModuleCache{}
	if got := render("c"); got != "!xy!" {
		t.Fatalf("the render changing what it made: %q, want !xy!", got)
	}
	for range 2 {
		if got := render("a"); got != want {
			t.Fatalf("after the first render changed its parts: %q, want %q", got, want)
		}
	}
	if cache.Reused() != 2 {
		t.Errorf("the module kept was taken %d times, want 2 (a copy of it as it was)", cache.Reused())
	}
	n := 0
	for _, list := range cache.loop {
		for _, le := range list {
			n++
			d, _ := le.mod.vars.getStr("d")
			if k, _ := d.(*Dict).getStr("k"); le.spoiled.Load() || k == "!" {
				t.Errorf("a part kept spoiled (%v) or changed (%v), want a copy as it was", le.spoiled.Load(), k)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d parts kept, want 2: copies of those the first render changed", n)
	}
}

// What ModuleCache works out of a template once (its sources, the names it reads: Program.facts)
// is of one program's trees: a program whose imported template changed, its importer's source
// the same, computes the module again (and again when the first program comes back), and a
// program that reads another name than the last sees it changed.
func TestKeptModuleTreeInfoIsPerProgram(t *testing.T) {
	progs := map[string]*Program{}
	for name, part := range map[string]string{
		"a": `{{ x }}`,
		"b": `{{ x }}!`,
		"c": `{{ y }}`,
	} {
		p, err := Compile(map[string]string{
			"main":     `{% import "model.j2" as m with context %}{{ m.v }}`,
			"model.j2": `{% set v %}{% include "part.j2" %}{% endset %}`,
			"part.j2":  part,
		}, "main", Options{})
		if err != nil {
			t.Fatal(err)
		}
		progs[name] = p
	}
	var cache ModuleCache
	want := map[string]string{"a": "1", "b": "1!", "c": "2"}
	for i, name := range []string{"a", "a", "b", "b", "a", "c", "c", "a"} {
		y := int64(2)
		if i == 7 {
			y = 3 // read by c only
		}
		out := render1(t, progs[name], map[string]any{"x": int64(1), "y": y}, &Modules{Across: &cache})
		if out != want[name] {
			t.Fatalf("render %d (program %s): %q, want %q", i, name, out, want[name])
		}
		cache.Sweep()
	}
	if n := cache.Reused(); n != 3 {
		t.Errorf("%d renders took the kept module, want 3 (the second of each program's in a row)", n)
	}
}
