package jinja

import (
	"fmt"
	"testing"
)

// A loop body reading a dict its route's part made (a module imported in a loop, kept and
// lent to each render: the same object) takes it as the same without comparing while the
// part's loan is not spoiled (sealedRead), and compares its copy otherwise: a change in place
// of the dict or of another of the part's values, a part computed again. Each render is
// compared with one computed afresh.
func TestLoopBodiesTakeSealedReadsAsTheSame(t *testing.T) {
	const routes = 6
	srcs := map[string]string{
		"t": `{% set bes, others = {}, {} %}{% for r in routes %}{% import "part" as p with context %}` +
			`{% do bes.setdefault(r.name, p.be) %}{% do others.setdefault(r.name, p.other) %}{% endfor %}` +
			`{% if change == "port" %}{% do bes["r1"].refs[0].update({"port": 99}) %}{% endif %}` +
			`{% if change == "port, the same" %}{% do bes["r1"].refs[0].update({"port": 1}) %}{% endif %}` +
			`{% if change == "another of its part's values" %}{% do others["r2"].append(1) %}{% endif %}` +
			`{% for name, be in bes|dictsort %}{{ name }}:{% for ref in be.refs %}{{ ref.svc }}/{{ ref.port }},{% endfor %};{% endfor %}`,
		"part": `{% set be = {"refs": [{"svc": r.svc, "port": r.port}]} %}{% set other = [] %}`,
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	vars := func(change string, edit func([]any)) map[string]any {
		var rs []any
		for i := range routes {
			rs = append(rs, map[string]any{"name": fmt.Sprint("r", i), "svc": fmt.Sprint("s", i), "port": int64(i)})
		}
		if edit != nil {
			edit(rs)
		}
		return map[string]any{"routes": rs, "change": change}
	}
	for _, c := range []struct {
		change         string
		edit           func([]any)
		reused, sealed int // in the render that changes
	}{
		{"nothing", nil, routes, routes},
		{"port", nil, routes - 1, routes - 1},
		{"port, the same", nil, routes, routes - 1},
		{"another of its part's values", nil, routes, routes - 1},
		{"a part's reads made anew, the same", func(rs []any) { rs[3] = map[string]any{"name": "r3", "svc": "s3", "port": int64(3)} }, routes, routes},
		{"a part computed again", func(rs []any) { rs[3].(map[string]any)["svc"] = "x" }, routes - 1, routes - 1},
	} {
		t.Run(c.change, func(t *testing.T) {
			var cache ModuleCache
			for round := range 3 {
				v := vars("", nil)
				if round == 2 {
					v = vars(c.change, c.edit)
				}
				reused, sealed := renderCounting(t, render, &cache, v, round)
				wantReused, wantSealed := []int{0, routes, c.reused}[round], []int{0, routes, c.sealed}[round]
				if reused != wantReused || sealed != wantSealed {
					t.Errorf("render %d: %d iterations reused, %d reads taken as sealed; want %d, %d", round, reused, sealed, wantReused, wantSealed)
				}
			}
		})
	}
}

// Another dict of the same part, at the place of the one a kept iteration read (a dict put
// before them shifts them all by one): not the same object, it is compared.
func TestLoopBodiesTellSealedReadsOfOnePartApart(t *testing.T) {
	p, err := Compile(map[string]string{
		"t": `{% set all = [] %}{% if shift %}{% do all.append({"refs": []}) %}{% endif %}` +
			`{% for r in routes %}{% import "part" as p with context %}{% do all.append(p.a) %}{% do all.append(p.b) %}{% endfor %}` +
			`{% for be in all %}{% for ref in be.refs %}{{ ref.port }},{% endfor %};{% endfor %}`,
		"part": `{% set a = {"refs": [{"port": r.port}]} %}{% set b = {"refs": [{"port": r.port + 1}]} %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	for round := range 3 {
		var rs []any
		for i := range 4 {
			rs = append(rs, map[string]any{"port": int64(10 * i)})
		}
		v := map[string]any{"routes": rs, "shift": round == 2}
		k.step(v, "render %d", round)
	}
	if k.cache.bodies.sealedSame < 8 {
		t.Errorf("%d reads taken as sealed, want 8 or more", k.cache.bodies.sealedSame)
	}
}

// A read is sealed only when one loan owns every dict and list in it: one that is nobody's
// could change without spoiling the loan. holds answers for the object sealed only, while its
// owner is that loan, not spoiled.
func TestSealOwnedWhole(t *testing.T) {
	var l, other loan
	inner := &List{items: []any{"x"}}
	outer := &Dict{keys: []any{"refs"}, vals: []any{inner}, owner: &l}
	for _, c := range []struct {
		name  string
		owner *loan // inner's
		ok    bool
	}{{"nobody's inside", nil, false}, {"another's inside", &other, false}, {"the loan's whole", &l, true}} {
		inner.owner = c.owner
		_, sealed := seal(outer, "copy").(*sealedRead)
		if sealed != c.ok {
			t.Errorf("%s: sealed %v, want %v", c.name, sealed, c.ok)
		}
	}
	s := seal(outer, "copy").(*sealedRead)
	if !s.holds(outer) {
		t.Error("the object sealed: not held")
	}
	twin := &Dict{keys: []any{"refs"}, vals: []any{inner}, owner: &l}
	if s.holds(twin) {
		t.Error("another object of the same loan: held")
	}
	inner.changing() // spoils l; outer still names it
	if s.holds(outer) {
		t.Error("the loan spoiled: held")
	}
}

// A dict of a kept part read by key stays compared by the keys looked up: a part computed
// again, its dict another object with the same values for them, serves.
func TestLoopBodiesKeyedReadsOfPartsAreNotSealed(t *testing.T) {
	p, err := Compile(map[string]string{
		"t": `{% set views = [] %}{% for r in routes %}{% import "part" as p with context %}{% do views.append(p.view) %}{% endfor %}` +
			`{% set v = views[0] %}{% for s in items %}{% for x in s %}{{ x }}{% endfor %}={{ v.get(s) }};{% endfor %}`,
		"part": `{% set view = {"ab": r.a, "cd": r.c, "x": r.x} %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	vars := func(x string) map[string]any {
		return map[string]any{"items": []any{"ab", "cd"}, "routes": []any{map[string]any{"a": "1", "c": "2", "x": x}}}
	}
	k := newKeptRenders(t, render)
	for round, x := range []string{"x", "x", "y"} { // the last: the part computed again, its view another dict
		before := k.cache.BodiesReused()
		k.step(vars(x), "render %d", round)
		if n, want := k.cache.BodiesReused()-before, []int{0, 2, 2}[round]; n != want {
			t.Errorf("render %d: %d iterations reused, want %d", round, n, want)
		}
	}
}

// A part computed again to the same values (it read something else that changed): its dict is
// another object, compared once and then held (reseal), so the renders after take it as the
// same without comparing; a change in place of it after that is seen. Each render is compared
// with one computed afresh.
func TestLoopBodiesResealReadsFoundTheSame(t *testing.T) {
	const routes = 6
	p, err := Compile(map[string]string{
		"t": `{% set bes = {} %}{% for r in routes %}{% import "part" as p with context %}` +
			`{% do bes.setdefault(r.name, p.be) %}{% endfor %}` +
			`{% if change %}{% do bes["r3"].refs[0].update({"port": 99}) %}{% endif %}` +
			`{% for name, be in bes|dictsort %}{{ name }}:{% for ref in be.refs %}{{ ref.svc }}/{{ ref.port }},{% endfor %};{% endfor %}`,
		"part": `{% set be = {"refs": [{"svc": r.svc, "port": r.port}]} %}{% set note = [r.note] %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	vars := func(note string, change bool) map[string]any {
		var rs []any
		for i := range routes {
			n := "a"
			if i == 3 {
				n = note
			}
			rs = append(rs, map[string]any{"name": fmt.Sprint("r", i), "svc": fmt.Sprint("s", i), "port": int64(i), "note": n})
		}
		return map[string]any{"routes": rs, "change": change}
	}
	var cache ModuleCache
	for round, c := range []struct {
		note           string
		change         bool
		reused, sealed int
	}{
		{"a", false, 0, 0},
		{"a", false, routes, routes},
		{"b", false, routes, routes - 1}, // r3's part computed again: its be compared
		{"b", false, routes, routes},     // and held since
		{"b", true, routes - 1, routes - 1},
	} {
		v := vars(c.note, c.change)
		reused, sealed := renderCounting(t, render, &cache, v, round)
		if reused != c.reused || sealed != c.sealed {
			t.Errorf("render %d: %d iterations reused, %d reads taken as sealed; want %d, %d", round, reused, sealed, c.reused, c.sealed)
		}
	}
}

// renderCounting renders vars with cache (render number round), fails t when the output is
// not what a render afresh gives, and returns how many iterations were reused and how many
// reads taken as sealed.
func renderCounting(t *testing.T, render func(map[string]any, *Modules) string, cache *ModuleCache, vars map[string]any, round int) (reused, sealed int) {
	t.Helper()
	reused, sealed = cache.BodiesReused(), cache.bodies.sealedSame
	got := render(vars, &Modules{Across: cache})
	if want := render(vars, nil); got != want {
		t.Fatalf("render %d: %q, computed afresh %q", round, got, want)
	}
	cache.Sweep()
	return cache.BodiesReused() - reused, cache.bodies.sealedSame - sealed
}

// reseal holds another object found the same only when one loan, not spoiled, owns it whole.
func TestResealOwnedWhole(t *testing.T) {
	var l loan
	outer := &Dict{keys: []any{"k"}, vals: []any{"v"}, owner: &l}
	s := seal(outer, "copy").(*sealedRead)
	nobodys := &Dict{keys: []any{"k"}, vals: []any{"v"}}
	s.reseal(nobodys)
	if s.holds(nobodys) || !s.holds(outer) {
		t.Error("resealed to a dict nobody owns")
	}
	twin := &Dict{keys: []any{"k"}, vals: []any{"v"}, owner: &l}
	s.reseal(twin)
	if !s.holds(twin) || s.holds(outer) {
		t.Error("not resealed to another dict of the loan")
	}
	list := &List{items: []any{"x"}, owner: &l}
	s.reseal(list)
	if !s.holds(list) || s.holds(twin) {
		t.Error("not resealed to a list of the loan")
	}
	var l2 loan
	mixed := &Dict{keys: []any{"refs"}, vals: []any{&List{items: []any{"x"}}}, owner: &l2} // its list nobody's
	s.reseal(mixed)
	if s.holds(mixed) || !s.holds(list) {
		t.Error("resealed to a dict holding a list nobody owns")
	}
	spoiled := &Dict{keys: []any{"k"}, vals: []any{"v"}, owner: &l2}
	spoiled.changing() // spoils l2
	s.reseal(spoiled)
	if s.holds(spoiled) || !s.holds(list) {
		t.Error("resealed to a dict of a spoiled loan")
	}
}
