package jinja

import (
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// mapTemplate maps records by attribute and by path, with a default, to a record (each
// record's meta), to what is missing (an Undefined: never kept), maps a list the template
// makes of dicts (which may change: never kept), and changes a mapped list it owns (the values
// kept are not the list it is given).
const mapTemplate = `names: {{ recs|map(attribute="name")|join(",") }}
uids: {{ recs|map(attribute="meta.uid")|list }}
sum: {{ recs|map(attribute="n")|sum }} {{ recs|map(attribute="gen", default=7)|sum }}
metas: {% for m in recs|map(attribute="meta") %}{{ m.uid }};{% endfor %}
missing: {{ recs|map(attribute="nope")|select("defined")|list|length }}
{% set ds = [] %}{% for r in recs[:80] %}{% do ds.append({"n": r.name}) %}{% endfor %}{% if mut >= 0 and mut < ds|length %}{% do ds[mut].update({"n": "changed"}) %}{% endif %}dicts: {{ ds|map(attribute="n")|join("|") }}
{% set owned = recs|map(attribute="name")|list %}{% do owned.append("more") %}{% do owned.pop(0) %}owned: {{ owned|length }} {{ owned|last }}
`

// map by attribute, its values given again from its last call along a random sequence of
// changes, renders every step as a fresh render does; many calls are patched.
func TestMapPatchedRendersAsAfresh(t *testing.T) {
	renderJoinWorlds(t, mapTemplate, 7, func(seed uint64, c *ModuleCache, counts map[string]int) {
		// Six sites of records per render; "half replaced" and the runs of many changes
		// read all again.
		patched := c.MapPatched()
		if patched < 200*4 {
			t.Errorf("seed %d: %d calls patched, want a good part of 200 renders' 6 (%v)", seed, patched, counts)
		}
		t.Logf("seed %d: %d calls patched (%v)", seed, patched, counts)
	})
}

// A value given again is the one the last call read for the same record; a record replaced
// by another at the same place, a value the same or not, is read again.
func TestMapPatchedReadsWhatChanged(t *testing.T) {
	rec := func(name string) any { return record.FromMap(nil, map[string]any{"name": name}) }
	var recs []any
	for i := range 100 {
		recs = append(recs, rec(string(rune('a'+i%26))+"x"))
	}
	p, err := Compile(map[string]string{"t": `{{ recs|map(attribute="name")|join(",") }}`}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeptRenders(t, renderOf(t, p))
	k.step(map[string]any{"recs": recs}, "first")
	next := append([]any(nil), recs...)
	next[50] = rec("changed")
	next = append(next, rec("added"))
	got := k.step(map[string]any{"recs": next}, "one replaced, one added")
	if want := "changed"; !strings.Contains(got, want) || !strings.Contains(got, "added") {
		t.Fatalf("rendered %q, want %q and %q in it", got, want, "added")
	}
	if k.cache.MapPatched() != 1 {
		t.Fatalf("%d calls patched, want 1", k.cache.MapPatched())
	}
}

// What a call keeps: only when every item and every value cannot change, so that a value
// given again is what reading it again gives.
func TestMapKeepsOnlyWhatCannotChange(t *testing.T) {
	rec := func(v any) any { return record.FromMap(nil, map[string]any{"a": v}) }
	d := &Dict{}
	d.set("a", "x")
	for _, c := range []struct {
		name string
		item any
		keep bool
	}{
		{"a record, a string", rec("x"), true},
		{"a record, a number", rec(int64(3)), true},
		{"a record, a record", rec(record.FromMap(nil, map[string]any{"b": "y"})), true},
		{"a record, marked text", rec("two\nlines"), false},
		{"a record without it (an Undefined)", record.FromMap(nil, map[string]any{"b": "y"}), false},
		{"a dict (it may change)", d, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &evaluator{maxSize: 1 << 30}
			items := make([]any, 70)
			for i := range items {
				items[i] = rec("plain")
			}
			items[33] = c.item
			_, _, keep, ok := e.mapValues(nil, items, attrParts("a"), nil)
			if !ok || keep != c.keep {
				t.Fatalf("keep %v ok %v, want keep %v", keep, ok, c.keep)
			}
		})
	}
}
