package jinja

import (
	"context"
	"testing"
)

// Lists already in order (ties among them) sort as Python's stable sorted() does, forwards
// and reversed: a tie keeps its order; a list in order, or in reverse order, stays or turns
// around as a whole but for its ties.
func TestSortKeepsTiesOfListsInOrder(t *testing.T) {
	src := `{{ xs|sort(attribute="k")|map(attribute="n")|join(",") }}|{{ xs|sort(attribute="k", reverse=true)|map(attribute="n")|join(",") }}|` +
		`{{ ys|sort(attribute="k")|map(attribute="n")|join(",") }}|{{ ys|sort(attribute="k", reverse=true)|map(attribute="n")|join(",") }}|` +
		`{{ d|dictsort|map("first")|join(",") }}|{{ d|dictsort(reverse=true)|map("first")|join(",") }}`
	p, err := Compile(map[string]string{"t": src}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	item := func(k, n string) any { return map[string]any{"k": k, "n": n} }
	up := []any{item("a", "1"), item("b", "2"), item("b", "3"), item("c", "4")}
	down := []any{item("c", "1"), item("b", "2"), item("b", "3"), item("a", "4")}
	d := newDict(3)
	for _, k := range []string{"a", "b", "c"} {
		_ = d.set(k, k)
	}
	out, err := p.Render(context.Background(), map[string]any{"xs": up, "ys": down, "d": d}, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1,2,3,4|4,2,3,1|4,2,3,1|1,2,3,4|a,b,c|c,b,a"; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}
