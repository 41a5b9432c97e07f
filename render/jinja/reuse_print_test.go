package jinja

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// printTemplates: blocks' parts imported in a loop and kept (their lists lent), merged into
// all and names; print-only loops over them (copied from the last render where their items
// are the same), and loops beside them that are not (a name of outside, the loop's position,
// break and continue, a filter with an else, a loop inside another).
var printTemplates = map[string]string{
	"t": `{% set all, names = [], [] %}` +
		`{% for blk in blocks %}{% import "part" as p with context %}{% do all.extend(p.items) %}{% do names.extend(p.names) %}{% endfor %}` +
		`{% if mut >= 0 and mut < all|length %}{% do all[mut].update({"k": mutKey}) %}{% endif %}` +
		"{% for e in all %}{{ e.k }} {{ e.id }} {{ e['s'] }}\n{% endfor %}" +
		"|{% for e in all %}{{ e.k }}{{ g }};{% endfor %}" +
		"|{% for e in all %}{{ loop.index }}{{ e.k }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }};{% endfor %}" +
		"|{% for e in all %}{{ e.k }}{% if e.id == stop %}{% break %}{% endif %}{% if e.n == 1 %}{% continue %}{% endif %}.{% endfor %}" +
		"|{% for e in all if e.n > 7 %}{{ e.k }}{% else %}none{% endfor %}" +
		"|{% for e in all[:skip] %}{{ e.id }}:{{ e.s }}{% else %}empty{% endfor %}" +
		"|{% for s in names %}{{ s }},{% endfor %}" +
		"|{% for o in outer %}[{% for e in all %}{{ e.id }}{{ e.s }}{% endfor %}]{{ o }}{% endfor %}" +
		"|{% for x in all|map(attribute='s')|list %}<{{ x }}>{% endfor %}",
	"part": `{% set items, names = [], [] %}{% for r in blk %}` +
		`{% do items.append({"k": r.k, "n": r.n, "id": r.id, "s": r.s}) %}{% do names.append(r.k) %}{% endfor %}`,
}

// printWorld is the blocks of records the templates read, changed step by step.
type printWorld struct {
	rng    *rand.Rand
	blocks [][]any
	next   int
}

func (w *printWorld) record() map[string]any {
	keys := []string{"a", "b", "c", "ab", ""}
	w.next++
	var s any = fmt.Sprint("s", w.next)
	if w.rng.IntN(5) == 0 {
		s = Secret(fmt.Sprint("secret", w.next))
	}
	return map[string]any{"k": keys[w.rng.IntN(len(keys))], "n": int64(w.rng.IntN(9)), "id": int64(w.next), "s": s}
}

func (w *printWorld) block() []any {
	var b []any
	for range 1 + w.rng.IntN(14) {
		b = append(b, w.record())
	}
	return b
}

// step changes the world and says how; vars are what the templates then read.
func (w *printWorld) step() (string, map[string]any) {
	vars := map[string]any{"mut": int64(-1), "mutKey": "", "g": "g", "stop": int64(w.rng.IntN(w.next + 1)),
		"skip": int64(40 + w.rng.IntN(40)), "outer": []any{"o1", "o2"}}
	what := ""
	switch n := len(w.blocks); w.rng.IntN(8) {
	case 0:
		what = "nothing"
	case 1:
		w.blocks = slices.Insert(w.blocks, w.rng.IntN(n+1), w.block())
		what = "a block added"
	case 2:
		if n > 1 {
			i := w.rng.IntN(n)
			w.blocks = slices.Delete(w.blocks, i, i+1)
		}
		what = "a block deleted"
	case 3:
		w.blocks[w.rng.IntN(n)] = w.block()
		what = "a block replaced"
	case 4:
		i, j := w.rng.IntN(n), w.rng.IntN(n)
		w.blocks[i], w.blocks[j] = w.blocks[j], w.blocks[i]
		what = "two blocks swapped"
	case 5:
		vars["mut"] = int64(w.rng.IntN(120))
		vars["mutKey"] = []string{"zz", "a", "q"}[w.rng.IntN(3)]
		what = "an item changed in place"
	case 6:
		vars["g"] = "G"
		what = "a name read outside the loop changed"
	case 7:
		vars["outer"] = []any{"o1", "o2", "o3"}
		what = "the outer loop's items"
	}
	blocks := make([]any, len(w.blocks))
	for i, b := range w.blocks {
		blocks[i] = b
	}
	vars["blocks"] = blocks
	return what, vars
}

// renderSecret renders with mods, giving the output and its secret spans.
func renderSecret(t *testing.T, p *Program, vars map[string]any, mods *Modules) string {
	t.Helper()
	res, err := p.RenderSharing(context.Background(), vars, Limits{}, nil, mods, false)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s\nsecret: %v", res.Bytes, res.Secret)
}

func TestPrintOnlyRunsCopiedRenderAsAfresh(t *testing.T) {
	p, err := Compile(printTemplates, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		w := &printWorld{rng: rand.New(rand.NewPCG(seed, 7))}
		for range 10 {
			w.blocks = append(w.blocks, w.block())
		}
		k := newKeptRenders(t, func(vars map[string]any, mods *Modules) string { return renderSecret(t, p, vars, mods) })
		counts := map[string]int{}
		for i := range 120 {
			what, vars := w.step()
			counts[what]++
			k.step(vars, "seed %d, step %d (%s)", seed, i, what)
		}
		copied := k.cache.bodies.printCopied
		if copied < 120*50 {
			t.Errorf("seed %d: %d iterations copied, want most of 120 renders' (%v)", seed, copied, counts)
		}
		t.Logf("seed %d: %d iterations copied (%v)", seed, copied, counts)
	}
}

// What a print-only loop copies from its last run, and what it runs again.
func TestPrintOnlyRunsCopyWhatCannotHaveChanged(t *testing.T) {
	tmpls := map[string]string{
		"t": `{% import "m" as m with context %}{% if mut >= 0 %}{% do m.items[mut].update({"k": "changed"}) %}{% endif %}` +
			"{% for e in m.items %}{{ e.k }}={{ e['v'] }}\n{% endfor %}{% for s in strs %}{{ s }},{% endfor %}" +
			"{% for v in m.secrets %}{{ v }};{% endfor %}",
		"m": `{% set items = [] %}{% for i in range(n) %}{% do items.append({"k": "k" ~ i, "v": sec if i == 3 else i}) %}{% endfor %}` +
			`{% set secrets = [sec, "x", sec] * 12 %}`,
	}
	p, err := Compile(tmpls, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	strs := func(n int) []any {
		var out []any
		for i := range n {
			out = append(out, fmt.Sprint("s", i))
		}
		return out
	}
	for _, c := range []struct {
		name   string
		vars   map[string]any
		copied int
	}{
		{"the same", map[string]any{"n": int64(50), "mut": int64(-1), "strs": strs(40)}, 49 + 40 + 36},
		{"strings inserted and deleted", map[string]any{"n": int64(50), "mut": int64(-1), "strs": slices.Concat([]any{"new"}, strs(40)[1:20], strs(40)[21:])}, 49 + 38 + 36},
		{"an item changed in place (its loan spoiled)", map[string]any{"n": int64(50), "mut": int64(10), "strs": strs(40)}, 40 + 36},
		{"items added (the module made again)", map[string]any{"n": int64(52), "mut": int64(-1), "strs": strs(40)}, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cache ModuleCache
			first := map[string]any{"n": int64(50), "mut": int64(-1), "strs": strs(40), "sec": Secret("pw")}
			renderSecret(t, p, first, &Modules{Across: &cache})
			cache.Sweep()
			c.vars["sec"] = Secret("pw")
			got := renderSecret(t, p, c.vars, &Modules{Across: &cache})
			if want := renderSecret(t, p, c.vars, nil); got != want {
				t.Fatalf("rendered\n%s\nafresh\n%s", got, want)
			}
			if n := cache.bodies.printCopied; n != c.copied {
				t.Errorf("%d iterations copied, want %d", n, c.copied)
			}
		})
	}
}

// Which print-only loops copy: those whose body reads the loop's names only.
func TestPrintBodyOwn(t *testing.T) {
	for body, want := range map[string]bool{
		"{{ e.k }} {{ e['v'] }}\n":     true,
		"{{ e }}{{ 7 }}":               true,
		"{{ e.k }}{{ g }}":             false, // a name of outside
		"{{ e.k|string }}":             false, // not print-only
		"{{ loop.index }}{{ e }}":      false,
		"{% if e %}{{ e }}{% endif %}": false,
	} {
		src := "{% for e in items %}" + body + "{% endfor %}"
		p, err := Compile(map[string]string{"t": src}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := p.templates["t"].tree.Body[0].(*parse.ForStmt)
		if got := printBodyOwn(s); got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}
