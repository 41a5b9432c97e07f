package jinja

import "testing"

// adopt leans on each loan whose lists a module holds as they are, looked up once a run of
// its items (adopter.last): a run of another loan's item after it is asked for on its own,
// and one that is not whole fails the module however many of the last loan's came before.
func TestAdoptLeansOnEachLoanOfARun(t *testing.T) {
	owned := func(l *loan, n int) []any {
		var out []any
		for range n {
			out = append(out, &List{items: []any{"k", "v"}, owner: l})
		}
		return out
	}
	for _, c := range []struct {
		name  string
		runs  func(a, b, notWhole *loan) [][]any
		ok    bool
		leans int
	}{
		{"one loan's run", func(a, _, _ *loan) [][]any { return [][]any{owned(a, 5)} }, true, 1},
		{"runs of two loans, back and forth", func(a, b, _ *loan) [][]any {
			return [][]any{owned(a, 3), owned(b, 2), owned(a, 4), owned(b, 1)}
		}, true, 2},
		{"a loan not whole after a run", func(a, _, n *loan) [][]any {
			return [][]any{owned(a, 3), owned(n, 1), owned(a, 2)}
		}, false, 0},
		{"a loan not whole at the end", func(a, b, n *loan) [][]any {
			return [][]any{owned(a, 3), owned(b, 3), owned(n, 1)}
		}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, notWhole := &loan{whole: true}, &loan{whole: true}, &loan{}
			var items []any
			for _, r := range c.runs(a, b, notWhole) {
				items = append(items, r...)
			}
			m := &module{vars: dictOfLen(1)}
			m.vars.keys[0], m.vars.vals[0] = "items", &List{items: items}
			on, ok := adoptModule(m, &loan{})
			if ok != c.ok || len(on) != c.leans {
				t.Fatalf("adopted %v, leaning on %d loans; want %v, %d", ok, len(on), c.ok, c.leans)
			}
			for _, it := range items {
				if o := it.(*List).owner; o != a && o != b && o != notWhole {
					t.Fatalf("an item's owner changed: %p", o)
				}
			}
		})
	}
}
