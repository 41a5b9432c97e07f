package jinja

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestDictUpdateMergesAsPython: update of dicts of many keys (set with one probe of the index,
// room reserved once) keeps each key where it was first set, with the last value given, and
// finds keys set as strings, Markup or tainted strings as one key, as Python does.
func TestDictUpdateMergesAsPython(t *testing.T) {
	src := `{%- set into = {} %}{% for b in blocks %}{% do into.update(b) %}{% endfor %}
{%- do into.update({"k-000-000": "first", ("k-%03d-%03d"|format(2, 5))|safe: "markup"}) %}
{%- for k, v in into.items() %}{{ k }}={{ v }};{% endfor %}|{{ into|length }}|{{ into.get("k-001-000") }}|{{ into["k-002-005"] }}`
	p, err := Compile(map[string]string{"t": src}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n, per = 5, 40
	out, err := p.Render(context.Background(), map[string]any{"blocks": toDicts(mergeBlocks(n, per))}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What Python gives: the keys in the order of the blocks (each block's in key order, the
	// next block's first key set by the block before with -1, then by its own block with 0).
	var want strings.Builder
	vals := map[string]string{}
	var order []string
	for i := range n {
		for j := range per {
			k := fmt.Sprintf("k-%03d-%03d", i, j)
			if _, ok := vals[k]; !ok {
				order = append(order, k)
			}
			vals[k] = fmt.Sprint(j)
		}
		next := fmt.Sprintf("k-%03d-%03d", i+1, 0)
		if _, ok := vals[next]; !ok {
			order = append(order, next)
		}
		vals[next] = "-1"
	}
	vals["k-000-000"], vals["k-002-005"] = "first", "markup"
	for _, k := range order {
		fmt.Fprintf(&want, "%s=%s;", k, vals[k])
	}
	fmt.Fprintf(&want, "|%d|%s|markup", len(order), vals["k-001-000"])
	if string(out) != want.String() {
		t.Errorf("got\n%s\nwant\n%s", out, want.String())
	}
}

// TestDictUpdateReservesRoom: an update of a dict with another's thousands of keys grows the
// keys, the values and the index once each, not step by step.
func TestDictUpdateReservesRoom(t *testing.T) {
	e := &evaluator{}
	big := toDicts(mergeBlocks(1, 2000))[0].(*Dict)
	start := toDicts(mergeBlocks(1, 20))[0].(*Dict)
	allocs := testing.AllocsPerRun(20, func() {
		d := start.copy()
		if err := e.updateDict(d, big); err != nil {
			t.Fatal(err)
		}
		if d.len() != 2001 {
			t.Fatalf("%d keys", d.len())
		}
	})
	// The copy (dict, keys, values, index and its table), then the keys, the values and the
	// index's table grown once each: 8 (10 under -race). Grown step by step as the keys come,
	// they were 27.
	if allocs > 12 {
		t.Errorf("%v allocations, want at most 12", allocs)
	}
}
