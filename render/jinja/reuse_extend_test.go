package jinja

import (
	"fmt"
	"strings"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// extendRoom's decisions: the room a list grown by extend is made with.
func TestExtendRoomDecisions(t *testing.T) {
	p := &Program{}
	at, other := &parse.CallExpr{}, &parse.CallExpr{}
	var cache ModuleCache
	long := &List{items: make([]any, 5000)}
	// The last render grew long at at: 5,000 items at its end.
	first := &evaluator{prog: p, shared: &Modules{Across: &cache}, maxItems: 1 << 20, callAt: at}
	if r := first.extendRoom(&List{items: make([]any, 1000)}, 1100); r != 0 {
		t.Fatalf("first growth at a site: room %d, want 0 (doubling's)", r)
	}
	first.grown = map[*seqSite]*List{}
	for s := range cache.bodies.seqs {
		first.grown[cache.bodies.seqs[s]] = long
	}
	cache.noteGrown(first.grown)
	for _, c := range []struct {
		name    string
		e       *evaluator
		l       *List
		n, want int
	}{
		{"a large list grown at the site", &evaluator{callAt: at}, &List{items: make([]any, 1000)}, 1100, 5000},
		{"room enough", &evaluator{callAt: at}, &List{items: make([]any, 1000, 2000)}, 1100, 0},
		{"a small list", &evaluator{callAt: at}, &List{items: make([]any, 100)}, 200, 0},
		{"another site", &evaluator{callAt: other}, &List{items: make([]any, 1000)}, 1100, 0},
		{"no site (not a method call)", &evaluator{}, &List{items: make([]any, 1000)}, 1100, 0},
		{"a render apart", &evaluator{callAt: at, shared: &Modules{Across: &cache, Apart: true}}, &List{items: make([]any, 1000)}, 1100, 0},
		{"no cache", &evaluator{callAt: at, shared: &Modules{}}, &List{items: make([]any, 1000)}, 1100, 0},
		{"more than the render may hold", &evaluator{callAt: at, maxItems: 3000}, &List{items: make([]any, 1000)}, 1100, 3000},
		{"a second list grown at the site in the render", &evaluator{callAt: at, grown: map[*seqSite]*List{}}, &List{items: make([]any, 1000)}, 1100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.e
			e.prog = p
			if e.grown != nil {
				for _, s := range cache.bodies.seqs {
					e.grown[s] = &List{} // another list grown at the site before
				}
			}
			if e.shared == nil {
				e.shared = &Modules{Across: &cache}
			}
			if e.maxItems == 0 {
				e.maxItems = 1 << 20
			}
			r := e.extendRoom(c.l, c.n)
			if r != c.want {
				t.Errorf("room %d, want %d", r, c.want)
			}
			grown := appendDoubling(c.l.items, make([]any, c.n-len(c.l.items)), r)
			if want := max(c.n, 2*len(c.l.items), r); cap(c.l.items) < c.n && cap(grown) != want {
				t.Errorf("grown to %d items of room, want %d", cap(grown), want)
			}
		})
	}
}

// A list merged by extend at each render is made at once as long as the last render's (its
// room noted at the end of a render), and renders as afresh.
func TestExtendMakesTheLastRendersRoom(t *testing.T) {
	tmpl := `{% set xs = [] %}{% for b in blocks %}{% do xs.extend(b) %}{% endfor %}` +
		`{{ xs|length }} {{ xs[0] }} {{ xs[-1] }}`
	p, err := Compile(map[string]string{"t": tmpl}, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := renderOf(t, p)
	var cache ModuleCache
	for _, n := range []int{3000, 3000, 4500, 2000} {
		var blocks []any
		for i := 0; i < n; i += 100 {
			var b []any
			for j := range 100 {
				b = append(b, fmt.Sprint(i+j))
			}
			blocks = append(blocks, b)
		}
		vars := map[string]any{"blocks": blocks}
		got := render(vars, &Modules{Across: &cache})
		if want := render(vars, nil); got != want || !strings.HasPrefix(got, fmt.Sprint(n, " ")) {
			t.Fatalf("%d items: rendered %q, afresh %q", n, got, want)
		}
		noted := 0
		for _, s := range cache.bodies.seqs {
			noted = max(noted, s.extended)
		}
		if noted != n {
			t.Errorf("%d items: %d noted as the room for the next render", n, noted)
		}
	}
}
