package jinja

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A loop body reading a large record by key, the record made anew at each render (as each
// sync's snapshot makes services.by_name): its kept iterations are compared through what
// differs between the records (recordDiff), and each serves only while what it looked up is
// the same. Each render is compared with one computed afresh.
func TestLoopBodiesReadLargeRecordsThroughTheirDiff(t *testing.T) {
	const n = 100 // more than minDiffed
	type entries = map[string]any
	svc := func(port int) *record.Record { return record.FromMap(nil, map[string]any{"port": int64(port)}) }
	kept := make([]*record.Record, n) // the same objects from render to render, as the snapshot's
	for i := range kept {
		kept[i] = svc(i)
	}
	base := func() entries {
		m := entries{}
		for i := range n {
			m[fmt.Sprintf("s%03d", i)] = kept[i]
		}
		return m
	}
	items, render := portLookups(t)
	vars := func(m entries) map[string]any {
		return map[string]any{"items": items, "res": map[string]any{"by": record.FromMap(nil, m)}}
	}
	for _, c := range []struct {
		name   string
		change func(m entries) // of a render after the first, from base
		reused int
	}{
		{"the same entries", func(entries) {}, 4},
		{"another key changed", func(m entries) { m["s002"] = svc(9) }, 4},
		{"another key added and one gone", func(m entries) { m["s0015"] = svc(9); delete(m, "s003") }, 4},
		{"a looked-up key's value another object, the same", func(m entries) { m["s050"] = svc(50) }, 4},
		{"a looked-up key's value another object, changed", func(m entries) { m["s050"] = svc(51) }, 3},
		{"a looked-up key gone", func(m entries) { delete(m, "s099") }, 3},
		{"a looked-up key that was not there added", func(m entries) { m["s200"] = svc(200) }, 3},
		{"many other keys changed", func(m entries) {
			for i := 10; i < 40; i++ {
				m[fmt.Sprintf("s%03d", i)] = svc(-1)
			}
		}, 4},
		{"many keys changed, a looked-up one among them", func(m entries) {
			for i := 30; i < 60; i++ {
				m[fmt.Sprintf("s%03d", i)] = svc(-1)
			}
		}, 3},
		{"every key changed", func(m entries) {
			for k := range m {
				m[k] = svc(-1)
			}
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKeptRenders(t, render)
			// Three renders: the second (the same entries, another record) moves the kept
			// reads to its record through a diff; the third is changed.
			for round, m := range []entries{base(), base(), base()} {
				if round == 2 {
					c.change(m)
				}
				before := k.cache.BodiesReused()
				k.step(vars(m), "render %d", round)
				reused, want := k.cache.BodiesReused()-before, []int{0, 4, c.reused}[round]
				if reused != want {
					t.Errorf("render %d reused %d iterations, want %d", round, reused, want)
				}
			}
			if k.cache.bodies.diffs.diffed != 2 {
				t.Errorf("%d pairs of records diffed, want 2", k.cache.bodies.diffs.diffed)
			}
		})
	}
}

// A record patched from the last one read (as the snapshot patches services.by_name) tells
// what changed: the diff is those keys, without comparing every entry, and an iteration that
// looked up one of them is computed again; one that looked up another is kept.
func TestLoopBodiesReadPatchedRecordsThroughTheirNote(t *testing.T) {
	const n = 100 // more than minDiffed and record.MinDerived
	svc := func(port int) *record.Record { return record.FromMap(nil, map[string]any{"port": int64(port)}) }
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("s%03d", i)] = svc(i)
	}
	items, render := portLookups(t)
	for _, c := range []struct {
		name    string
		changes []record.Change
		reused  int
	}{
		{"another key changed", []record.Change{{Key: "s002", Value: svc(9)}}, 4},
		{"a looked-up key changed", []record.Change{{Key: "s050", Value: svc(51)}}, 3},
		{"a looked-up key noted, its value the same object", []record.Change{{Key: "s050", Value: m["s050"]}}, 4},
		{"a looked-up key gone, another added", []record.Change{{Key: "s0015", Value: svc(9)}, {Key: "s099", Remove: true}}, 3},
		{"a looked-up key that was not there added", []record.Change{{Key: "s200", Value: svc(200)}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKeptRenders(t, render)
			r0 := record.FromMap(nil, m)
			k.step(map[string]any{"items": items, "res": map[string]any{"by": r0}}, "the first render")
			r1 := r0.Patched(c.changes)
			if _, ok := r1.ChangedSince(r0); !ok {
				t.Fatal("the patched record does not note what it was made from")
			}
			before := k.cache.BodiesReused()
			k.step(map[string]any{"items": items, "res": map[string]any{"by": r1}}, "the render after %v", c.changes)
			if reused := k.cache.BodiesReused() - before; reused != c.reused {
				t.Errorf("reused %d iterations, want %d", reused, c.reused)
			}
			d := diffRecords(r0, r1)
			if got := append(slices.Clone(d.few), slices.Collect(maps.Keys(d.keys))...); len(got) != len(c.changes) {
				t.Errorf("the diff is %q, want the %d keys changed", got, len(c.changes))
			}
		})
	}
}

// portLookups is a loop looking up the port of four services by name in res.by (s200: not
// there), and its render.
func portLookups(t *testing.T) ([]any, func(vars map[string]any, mods *Modules) string) {
	tmpl := `{% for s in items %}{{ s }}:{{ res.by.get(s, {"port": "-"}).port }};{% endfor %}`
	p, err := Compile(map[string]string{"t": tmpl}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return []any{"s001", "s050", "s099", "s200"}, renderOf(t, p)
}

// diffRecords notes the keys in one record only and those whose values differ, and gives up
// past maxDiffKeys.
func TestDiffRecords(t *testing.T) {
	rec := func(kv ...any) *record.Record {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return record.FromMap(nil, m)
	}
	d := diffRecords(rec("a", 1, "b", "x", "c", 3, "e", 5), rec("b", "x", "c", 4, "d", 1, "e", 5, "f", 0))
	got := fmt.Sprint(len(d.few), d.many)
	for _, k := range []string{"a", "c", "d", "f"} {
		if !slices.Contains(d.few, k) {
			t.Errorf("%s not noted as differing", k)
		}
	}
	if got != "4 false" {
		t.Errorf("diff %v", d.keys)
	}
	big := map[string]any{}
	for i := range maxDiffKeys + 1 {
		big[fmt.Sprint(i)] = i
	}
	if d := diffRecords(rec(), record.FromMap(nil, big)); !d.many || d.keys != nil {
		t.Errorf("%d keys differ: not many", len(big))
	}
	if d := diffRecords(rec("a", 1), rec("a", 1)); d.many || len(d.few) != 0 || len(d.keys) != 0 {
		t.Errorf("the same records: %v differ", d.keys)
	}
}

// A run of a loop follows a keyed read's chain once for the data it starts from (bodyRun
// chainValue): the runs of an inner loop, each reading another object by key, find each its
// own. Each render is compared with one computed afresh.
func TestLoopBodyChainsFollowedPerObject(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"items": []any{"a", "b", "c", "d", "e"},
			"groups": []any{
				map[string]any{"n": "g1", "r": map[string]any{"by": map[string]any{"a": 1, "b": 2, "c": 3}}},
				map[string]any{"n": "g2", "r": map[string]any{"by": map[string]any{"a": 10, "c": 30, "e": 50}}},
				map[string]any{"n": "g3", "r": record.FromMap(nil, map[string]any{"by": map[string]any{"a": 7}})},
			},
		}
	}
	// The outer loop is never kept (it reads loop.previtem): its inner loop's runs are.
	tmpl := `{% for g in groups %}{{ g.n }}{{ loop.previtem is defined }}:{% for s in items %}{{ s }}={{ g.r.by.get(s) }},{% endfor %};{% endfor %}`
	p, err := Compile(map[string]string{"t": tmpl}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	for round := range 3 {
		v := base()
		if round == 2 {
			v["groups"].([]any)[1].(map[string]any)["r"] = map[string]any{"by": map[string]any{"a": 11}}
		}
		k.step(v, "render %d", round)
	}
	if n := k.cache.BodiesReused(); n < 10 {
		t.Errorf("%d inner iterations reused, want 10 or more", n)
	}
}

// A module imported in a loop that reads a large record by key, the record made anew at each
// render, compares its kept reads through the records' diff as a loop body does: it serves
// only while what it looked up is the same.
func TestLoopImportsReadLargeRecordsThroughTheirDiff(t *testing.T) {
	const n = 100 // more than minDiffed
	kept := make([]*record.Record, n)
	for i := range kept {
		kept[i] = record.FromMap(nil, map[string]any{"port": int64(i)})
	}
	base := func() map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("s%03d", i)] = kept[i]
		}
		return m
	}
	p, err := Compile(map[string]string{
		"t":    `{% for s in items %}{% import "part" as p with context %}{{ p.out }};{% endfor %}`,
		"part": `{% set out = s ~ ":" ~ res.by.get(s, {"port": "-"}).port %}`,
	}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		reused int
	}{
		{"the same entries", func(map[string]any) {}, 3},
		{"another key changed", func(m map[string]any) { m["s002"] = record.FromMap(nil, map[string]any{"port": int64(-1)}) }, 3},
		{"a looked-up key's value changed", func(m map[string]any) { m["s050"] = record.FromMap(nil, map[string]any{"port": int64(-1)}) }, 2},
		{"a looked-up key gone", func(m map[string]any) { delete(m, "s099") }, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKeptRenders(t, render)
			for round := range 3 {
				m := base()
				if round == 2 {
					c.change(m)
				}
				vars := map[string]any{"items": []any{"s001", "s050", "s099"}, "res": map[string]any{"by": record.FromMap(nil, m)}}
				before := k.cache.LoopReused()
				k.step(vars, "render %d", round)
				if reused, want := k.cache.LoopReused()-before, []int{0, 3, c.reused}[round]; reused != want {
					t.Errorf("render %d reused %d imports, want %d", round, reused, want)
				}
			}
			if k.cache.bodies.diffs.diffed != 2 {
				t.Errorf("%d pairs of records diffed, want 2", k.cache.bodies.diffs.diffed)
			}
		})
	}
}

// BodiesReusedAt counts a loop's reused iterations before the render's Sweep and after.
func TestBodiesReusedAtBeforeAndAfterSweep(t *testing.T) {
	p, err := Compile(map[string]string{"t": "\n{% for s in items %}{{ s|string }}{% endfor %}"}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	vars := map[string]any{"items": []any{"a", "b", "c"}}
	var cache ModuleCache
	render(vars, &Modules{Across: &cache})
	cache.Sweep()
	render(vars, &Modules{Across: &cache})
	if n := cache.BodiesReusedAt("t", 2); n != 3 {
		t.Errorf("before the sweep: %d reused, want 3", n)
	}
	cache.Sweep()
	render(vars, &Modules{Across: &cache})
	cache.Sweep()
	if n := cache.BodiesReusedAt("t", 2); n != 6 {
		t.Errorf("after the sweeps: %d reused, want 6", n)
	}
}
