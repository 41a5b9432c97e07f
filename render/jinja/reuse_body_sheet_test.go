package jinja

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// A loop whose body reads a large record by key keeps a sheet of each run: the next render
// writes the kept iteration of each item matched with the last run's, unchanged since, whose
// looked-up keys are the same in the new record, without comparing its reads; every other
// iteration goes the way of a kept loop's. Each render is compared with one computed afresh,
// and the iterations written from the sheet are counted.
func TestLoopSheetsWriteUnchangedIterations(t *testing.T) {
	const n = 100 // more than minDiffed and minPrintKept
	svc := func(port int) *record.Record { return record.FromMap(nil, map[string]any{"port": int64(port)}) }
	kept := make([]*record.Record, n) // the same objects from render to render, as the snapshot's
	for i := range kept {
		kept[i] = svc(i)
	}
	type world struct {
		by     map[string]any
		items  []any
		suffix string
	}
	base := func() *world {
		w := &world{by: map[string]any{}, suffix: ";"}
		for i := range n {
			name := fmt.Sprintf("s%03d", i)
			w.by[name] = kept[i]
			w.items = append(w.items, name)
		}
		return w
	}
	vars := func(w *world) map[string]any {
		return map[string]any{"items": w.items, "suffix": w.suffix, "res": map[string]any{"by": record.FromMap(nil, w.by)}}
	}
	plain := `{% for s in items %}{{ s }}:{{ res.by.get(s, {"port": "-"}).port }}{{ suffix }}{% endfor %}`
	for _, c := range []struct {
		name   string
		tmpl   string
		change func(w *world) // of the third render, from base
		copied int            // iterations of the third render written from the sheet
	}{
		{"the same entries", plain, func(*world) {}, n},
		{"another key changed", plain, func(w *world) { w.by["x"] = svc(9) }, n},
		{"a looked-up key's value changed", plain, func(w *world) { w.by["s050"] = svc(51) }, n - 1},
		{"a looked-up key's value another object, the same", plain, func(w *world) { w.by["s050"] = svc(50) }, n},
		{"a looked-up key gone", plain, func(w *world) { delete(w.by, "s099") }, n - 1},
		{"an item added and one gone", plain, func(w *world) {
			w.items = slices.Insert(slices.Delete(w.items, 70, 71), 10, "s0105")
			w.by["s0105"] = svc(105)
		}, n - 1},
		{"the items reversed: too many moved to match", plain, func(w *world) { slices.Reverse(w.items) }, 0},
		{"a value read outside the loop's names changed", plain, func(w *world) { w.suffix = "," }, 0},
		{"many keys changed", plain, func(w *world) {
			for i := 1; i < n; i += 2 {
				w.by[fmt.Sprintf("s%03d", i)] = svc(-i)
			}
		}, n / 2},
		{"the loop's position read: no sheet", `{% for s in items %}{{ loop.index }}{{ res.by.get(s).port }}{% endfor %}`, func(*world) {}, 0},
		{"a filter: no sheet", `{% for s in items if s %}{{ res.by.get(s).port }}{% endfor %}`, func(*world) {}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Compile(map[string]string{"t": c.tmpl}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := newKeptRenders(t, renderOf(t, p))
			// Three renders: the second (the same entries, another record) takes every
			// iteration from the first's sheet; the third is changed.
			for round := range 3 {
				w := base()
				if round == 2 {
					c.change(w)
				}
				before := k.cache.bodies.sheetCopied
				k.step(vars(w), "render %d", round)
				copied := k.cache.bodies.sheetCopied - before
				want := []int{0, n, c.copied}[round]
				if round == 1 && c.tmpl != plain {
					want = 0
				}
				if copied != want {
					t.Errorf("render %d wrote %d iterations from the sheet, want %d", round, copied, want)
				}
			}
		})
	}
}

// Items that a kept module holds (the Ingress example's backends, lists a block's part
// made) match the last run's by identity while nothing changed them: one changed in place
// after the module was kept, before the loop, writes nothing of that module's items from the
// sheet, and every render is the one computed afresh.
func TestLoopSheetsTakeNoItemChangedInPlace(t *testing.T) {
	const n = 80
	by := map[string]any{}
	for i := range n {
		by[fmt.Sprintf("s%03d", i)] = record.FromMap(nil, map[string]any{"port": int64(i)})
	}
	srcs := map[string]string{
		"m.j2": `{%- set backends = [] %}{% for s in names %}{% do backends.append([s, "be_" ~ s]) %}{% endfor %}`,
		"t": `{%- import "m.j2" as m with context -%}
{%- if spoil %}{% do m.backends[3].pop() %}{% do m.backends[3].append("be_x") %}{% endif %}
{%- for name, be in m.backends %}{{ be }}={{ res.by.get(name).port }};{% endfor %}`,
	}
	p, err := Compile(srcs, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]any, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
	}
	vars := func(spoil bool) map[string]any {
		return map[string]any{"names": names, "spoil": spoil, "res": map[string]any{"by": record.FromMap(nil, by)}}
	}
	k := newKeptRenders(t, renderOf(t, p))
	for round, c := range []struct {
		spoil bool
		want  int
	}{{false, 0}, {false, n}, {true, 0}, {false, 0}, {false, n}} {
		before := k.cache.bodies.sheetCopied
		k.step(vars(c.spoil), "render %d", round)
		if copied := k.cache.bodies.sheetCopied - before; copied != c.want {
			t.Errorf("render %d (spoiled: %v) wrote %d iterations from the sheet, want %d", round, c.spoil, copied, c.want)
		}
	}
}

// A kept read notes the record it was last found the same in weakly: the entries a sheet
// takes without comparing them hold no record of the data once nothing else does (each
// change's snapshot makes new ones), and one gone is found the same by looking.
func TestIdentBoxHoldsRecordsWeakly(t *testing.T) {
	rec := record.FromMap(nil, map[string]any{"a": int64(1)})
	box := newIdentBox(rec)
	if box.value() != any(rec) {
		t.Fatalf("value %v, want the record", box.value())
	}
	m := map[string]any{"a": 1}
	if mb := newIdentBox(m); !sameObject(mb.value(), m) {
		t.Errorf("a map's box gives %v", mb.value())
	}
	k := &keyedRead{looked: []lookup{{key: "a", hk: hashKey{kind: 's', s: "a"}, val: int64(1), found: true}}}
	k.ident.Store(box)
	rec = nil
	runtime.GC()
	runtime.GC()
	if v := box.value(); v != nil {
		t.Errorf("the box still holds %v", v)
	}
	if !k.same(record.FromMap(nil, map[string]any{"a": int64(1), "b": int64(2)})) {
		t.Error("a read whose record is gone is not found the same by looking")
	}
	if k.same(record.FromMap(nil, map[string]any{"a": int64(2)})) {
		t.Error("a read whose record is gone is found the same with another value")
	}
}
