package jinja

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// joinTemplate joins records by attribute and path, their names as strings (a list the
// template makes, of immutable items), items that may change (dicts: never kept), and with
// other separators at one site (a loop's body, which keeps nothing of its calls).
const joinTemplate = `uids: {{ recs|join(",", attribute="meta.uid") }}
names: {{ recs|map(attribute="name")|list|join }}
plain: {{ names|join("; ") }}
{% set ds = [] %}{% for r in recs[:80] %}{% do ds.append({"n": r.name}) %}{% endfor %}{% if mut >= 0 and mut < ds|length %}{% do ds[mut].update({"n": "changed"}) %}{% endif %}dicts: {{ ds|join("|", attribute="n") }}
{% for sep in seps %}seps: {{ recs|join(sep, attribute="n") }}
{% endfor %}`

// joinWorld is a list of records changed step by step, as the Ingresses of a cluster.
type joinWorld struct {
	rng  *rand.Rand
	recs []any
	next int
}

func (w *joinWorld) record() *record.Record {
	w.next++
	uid := fmt.Sprintf("%02x-%d", w.rng.IntN(256), w.next)
	if w.rng.IntN(20) == 0 {
		uid = "" // a part of nothing
	}
	return record.FromMap(nil, map[string]any{
		"name": fmt.Sprintf("r%d", w.next),
		"meta": record.FromMap(nil, map[string]any{"uid": uid}),
		"n":    int64(w.rng.IntN(1000)),
	})
}

// step changes the list and says how; vars are what the template then reads.
func (w *joinWorld) step() (string, map[string]any) {
	what := ""
	n := len(w.recs)
	switch w.rng.IntN(9) {
	case 0:
		what = "nothing"
	case 1:
		w.recs = slices.Insert(w.recs, w.rng.IntN(n+1), any(w.record()))
		what = "one added"
	case 2:
		if n > 1 {
			i := w.rng.IntN(n)
			w.recs = slices.Delete(w.recs, i, i+1)
		}
		what = "one deleted"
	case 3:
		w.recs[w.rng.IntN(n)] = w.record()
		what = "one replaced"
	case 4:
		i, j := w.rng.IntN(n), w.rng.IntN(n)
		w.recs[i], w.recs[j] = w.recs[j], w.recs[i]
		what = "two swapped"
	case 5:
		for i := range w.recs {
			if w.rng.IntN(2) == 0 {
				w.recs[i] = w.record()
			}
		}
		what = "half replaced"
	case 6:
		i := w.rng.IntN(n)
		run := []any{w.record(), w.record(), w.record()}
		w.recs = slices.Concat(w.recs[:i], run, w.recs[min(n, i+5):])
		what = "a run replaced"
	case 7:
		// The same uid, another name: the uids' string is the last one.
		i := w.rng.IntN(n)
		meta, _ := w.recs[i].(*record.Record).Get("meta")
		w.next++
		w.recs[i] = record.FromMap(nil, map[string]any{"name": fmt.Sprintf("r%d", w.next), "meta": meta, "n": int64(1)})
		what = "one replaced, its uid the same"
	default:
		w.recs = append(w.recs, w.record())
		what = "one appended"
	}
	var names []any
	for _, r := range w.recs {
		v, _ := r.(*record.Record).Get("name")
		names = append(names, v)
	}
	seps := []any{",", ",", "-"}
	vars := map[string]any{"recs": slices.Clone(w.recs), "names": names, "seps": seps,
		"mut": int64(w.rng.IntN(100))}
	return what, vars
}

// join, patched from its last call along a random sequence of changes, renders every step as
// a fresh render does; many calls are patched.
func TestJoinPatchedRendersAsAfresh(t *testing.T) {
	renderJoinWorlds(t, joinTemplate, 5, func(seed uint64, c *ModuleCache, counts map[string]int) {
		patched := c.JoinPatched()
		if patched < 200*2 {
			t.Errorf("seed %d: %d calls patched, want a good part of 200 renders' 3 (%v)", seed, patched, counts)
		}
		t.Logf("seed %d: %d calls patched (%v)", seed, patched, counts)
	})
}

// renderJoinWorlds renders template along 200 random changes of a joinWorld of 150 records
// (the PCG stream stream), for four seeds, each step compared with a fresh render; then
// check reads the cache, with how many changes of each kind were made.
func renderJoinWorlds(t *testing.T, template string, stream uint64, check func(seed uint64, c *ModuleCache, counts map[string]int)) {
	t.Helper()
	p, err := Compile(map[string]string{"t": template}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		w := &joinWorld{rng: rand.New(rand.NewPCG(seed, stream))}
		for range 150 {
			w.recs = append(w.recs, w.record())
		}
		k := newKeptRenders(t, renderOf(t, p))
		counts := map[string]int{}
		for i := range 200 {
			what, vars := w.step()
			counts[what]++
			k.step(vars, "seed %d, step %d (%s)", seed, i, what)
		}
		check(seed, &k.cache, counts)
	}
}

// joinState's decisions: what a call copies from the last, and when it makes all again;
// each output is the one made afresh.
func TestJoinPatchDecisions(t *testing.T) {
	rec := func(i int) any {
		return record.FromMap(nil, map[string]any{"uid": fmt.Sprintf("u%03d", i)})
	}
	var base []any
	for i := range 200 {
		base = append(base, rec(i))
	}
	replaced := func(at ...int) []any {
		out := slices.Clone(base)
		for _, i := range at {
			out[i] = rec(i) // another record, its uid the same
		}
		return out
	}
	dicts := func(items []any) []any {
		out := slices.Clone(items)
		out[3] = &Dict{}
		return out
	}
	for _, c := range []struct {
		name          string
		first, next   []any
		attr          any
		patched, kept bool
		same          bool // the last string given again (sameParts)
	}{
		{"the same items", base, base, "uid", true, true, true},
		{"one replaced, its part the same", base, replaced(70), "uid", true, true, true},
		{"the first and last replaced, their parts the same", base, replaced(0, 199), "uid", true, true, true},
		{"one replaced, its part another", base, slices.Concat(base[:70], []any{rec(1000)}, base[71:]), "uid", true, true, false},
		{"one added", base, slices.Concat(base[:50], []any{rec(1000)}, base[50:]), "uid", true, true, false},
		{"one deleted", base, slices.Concat(base[:50], base[51:]), "uid", true, true, false},
		{"the first and last replaced", base, slices.Concat([]any{rec(1000)}, base[1:199], []any{rec(1001)}), "uid", true, true, false},
		{"two swapped", base, func() []any {
			out := slices.Clone(base)
			out[10], out[150] = out[150], out[10]
			return out
		}(), "uid", true, true, false},
		{"most items new", base, slices.Concat(base[:50], base[:150]), "uid", false, true, false},
		{"another attribute", base, base, "other", false, true, false},
		{"an item that may change, first", dicts(base), base, "uid", false, true, false},
		{"an item that may change, next", base, dicts(base), "uid", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &evaluator{maxSize: 1 << 30}
			want := func(items []any, attr any) string {
				var parts []string
				for _, it := range items {
					s, err := e.joinPart(it, attrParts(attr), true)
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, s)
				}
				return strings.Join(parts, ",")
			}
			st := &joinState{sep: ",", attr: "uid"}
			s, patched, keep, ok := st.make(e, c.first, attrParts("uid"))
			if !ok || patched || s != want(c.first, "uid") {
				t.Fatalf("first call: %q, patched %v, ok %v", s, patched, ok)
			}
			last := s
			if c.attr != st.attr || !keep {
				st = &joinState{sep: ",", attr: c.attr} // as joinKept: nothing kept to patch
			}
			s, patched, keep, ok = st.make(e, c.next, attrParts(c.attr))
			if !ok || s != want(c.next, c.attr) {
				t.Fatalf("next call: %q, want %q", s, want(c.next, c.attr))
			}
			if patched != c.patched || keep != c.kept {
				t.Errorf("patched %v, kept %v; want %v, %v", patched, keep, c.patched, c.kept)
			}
			if same := unsafe.StringData(s) == unsafe.StringData(last); same != c.same {
				t.Errorf("the last string given again: %v, want %v", same, c.same)
			}
		})
	}
}

// A string kept longer than a render may make is not given again: the filter, run afresh,
// fails as it does.
func TestJoinKeptLongerThanTheRenderMayMakeIsNotGiven(t *testing.T) {
	var items []any
	for i := range 100 {
		items = append(items, record.FromMap(nil, map[string]any{"uid": fmt.Sprintf("u%03d", i)}))
	}
	st := &joinState{sep: ",", attr: "uid"}
	if _, _, _, ok := st.make(&evaluator{maxSize: 1 << 20}, items, attrParts("uid")); !ok {
		t.Fatal("first call not made")
	}
	if s, _, _, ok := st.make(&evaluator{maxSize: 100}, items, attrParts("uid")); ok {
		t.Errorf("made %d bytes where 100 may be", len(s))
	}
}
