package jinja

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// An item whose value flaps between two versions (a pod added, then deleted) finds the kept
// iteration of two renders ago by its reads' hash: that one was not in the last render's run,
// so the hints are not indexed (a map of the whole run) to realign the next iterations, and
// those still find theirs in place.
func TestLoopBodiesOlderEntryDoesNotIndexHints(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for s in items %}{{ s|string }};{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	for round := range 6 {
		items := make([]any, 40)
		for i := range items {
			items[i] = fmt.Sprint("s", i)
		}
		items[0] = fmt.Sprint("v", round%2)
		before := k.cache.BodiesReused()
		k.step(map[string]any{"items": items}, "render %d", round)
		if n, want := k.cache.BodiesReused()-before, map[bool]int{true: 40, false: 39}[round >= 2]; round > 0 && n != want {
			t.Errorf("render %d: reused %d, want %d", round, n, want)
		}
	}
	if n := k.cache.bodies.hintsIndexed; n != 0 {
		t.Errorf("hints indexed %d times, want 0", n)
	}
}

// The iterations of a run compare their keyed reads through the diff of the records they were
// last found the same in and the one read now, one diff per pair: an iteration whose kept
// read was last found the same in an older record (its item absent from the render between)
// compares through that pair's diff, not through the one its run found before it.
func TestLoopBodiesKeyedReadsDiffByTheirOwnRecord(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% for x in items %}{{ x }}={{ data.by.get(x, "none") }};{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]any, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
	}
	byOf := func(k50 string) map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			m[k.(string)] = "v" + k.(string)
		}
		m["k050"] = k50
		return map[string]any{"by": record.FromMap(nil, m)}
	}
	without50 := slices.Concat(keys[:50], keys[51:])
	k := newKeptRenders(t, renderOf(t, p))
	for round, vars := range []map[string]any{
		{"items": keys, "data": byOf("a")},
		{"items": without50, "data": byOf("b")}, // k050's read changed while it was not there
		{"items": keys, "data": byOf("b")},      // the same contents, another record
	} {
		k.step(vars, "render %d", round)
	}
	if n := k.cache.BodiesReused(); n < 99+99 {
		t.Errorf("reused %d iterations, want at least %d", n, 99+99)
	}
}

// A loop's kept iterations, through random changes of each kind of what they read: the loop's
// item (its names unpacked from the template's lists), a keyed read, a name read outside the
// loop, the loop's position after an item inserted or deleted, a namespace; and records made
// anew with the same contents. Each render is the one computed afresh.
func TestLoopBodiesRandomChangesRenderAsAfresh(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% set items = [] %}
{%- for r in raw %}{% do items.append([r[0], (r[1], r[2])]) %}{% endfor %}
{%- set ns = namespace(tag=tag) %}
{%- for name, (key, port) in items %}{{ loop.index }}{{ loop.first }}{{ loop.last }} {{ name }} {{ key }}:{{ port }} {{ data.by.get(key, "none") }} {{ prefix }}
{% endfor %}
{%- for name, (key, port) in items %}{% for c in "ab" %}{{ c }}{{ port }}{% endfor %}{{ ns.tag }} {{ name }}
{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		by := map[string]any{}
		for i := range 100 {
			by[fmt.Sprintf("k%03d", i)] = fmt.Sprint("v", i)
		}
		var raw []any
		for i := range 60 {
			raw = append(raw, []any{fmt.Sprint("n", i), fmt.Sprintf("k%03d", rng.IntN(110)), int64(i % 7)})
		}
		prefix, tag := "p0", "t0"
		rec := record.FromMap(nil, maps.Clone(by))
		k := newKeptRenders(t, renderOf(t, p))
		counts := map[string]int{}
		for step := range 120 {
			what := []string{"item", "keyed", "record", "outer", "insert", "delete", "namespace", "none"}[rng.IntN(8)]
			counts[what]++
			switch what {
			case "item":
				raw = slices.Clone(raw)
				i := rng.IntN(len(raw))
				raw[i] = []any{raw[i].([]any)[0], raw[i].([]any)[1], int64(rng.IntN(7))}
			case "keyed":
				by[fmt.Sprintf("k%03d", rng.IntN(100))] = fmt.Sprint("w", step)
				rec = record.FromMap(nil, maps.Clone(by))
			case "record":
				rec = record.FromMap(nil, maps.Clone(by))
			case "outer":
				prefix = fmt.Sprint("p", rng.IntN(3))
			case "insert":
				i := rng.IntN(len(raw) + 1)
				raw = slices.Insert(slices.Clone(raw), i, any([]any{fmt.Sprint("m", step), fmt.Sprintf("k%03d", rng.IntN(110)), int64(step % 7)}))
			case "delete":
				if len(raw) > 1 {
					i := rng.IntN(len(raw))
					raw = slices.Delete(slices.Clone(raw), i, i+1)
				}
			case "namespace":
				tag = fmt.Sprint("t", rng.IntN(3))
			}
			vars := map[string]any{"raw": raw, "data": map[string]any{"by": rec}, "prefix": prefix, "tag": tag}
			k.step(vars, "seed %d, step %d (%s)", seed, step, what)
		}
		// (A loop that found few of its iterations kept in two renders in a row is turned off:
		// a change of prefix, or an insert near the top, misses most of the first loop's.)
		if n := k.cache.BodiesReused(); n < 120*10 {
			t.Errorf("seed %d: %d iterations reused, want a good part of 120 renders' 120 (%v)", seed, n, counts)
		}
		t.Logf("seed %d: %d iterations reused (%v)", seed, k.cache.BodiesReused(), counts)
	}
}

// A kept iteration that read a built-in function by a name is not the one of an iteration that
// reads another built-in by that name, nor one that finds the name not set.
func TestLoopBodiesBuiltinReadByName(t *testing.T) {
	p, err := Compile(map[string]string{"t": `{% if which == "a" %}{% set f = dict %}{% elif which == "b" %}{% set f = namespace %}{% endif %}
{%- for x in items %}{{ x ~ ":" }}{{ (f(a=1) is mapping) if f is defined else "-" }};{% endfor %}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	items := []any{"p", "q", "r", "s", "t"}
	for round, which := range []string{"a", "a", "b", "b", "c", "c", "a"} {
		k.step(map[string]any{"items": items, "which": which}, "render %d (%s)", round, which)
	}
	if k.cache.BodiesReused() == 0 {
		t.Error("no iteration reused")
	}
}
