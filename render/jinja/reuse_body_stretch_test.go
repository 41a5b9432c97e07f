package jinja

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// stretchTemplates: loops whose body reads the loop variable only (stretches), over records
// and strings of the data (secrets among them), with a filter reading a name of outside that changes, break and
// continue in kept iterations; and loops beside them that may not stretch (a name of outside
// read by the body, a filter reading a list the body appends to).
var stretchTemplates = map[string]string{
	"t": `{% for s in items %}{% if s.on %}[{{ s.name }}{% for p in s.ports %} {{ p }}{% endfor %}]{% endif %}{% endfor %}` +
		`|{% with only = flag %}{% for s in items if s.on or not only %}{% set n = s.name|length %}{{ s.name }}:{{ n }},{% endfor %}{% endwith %}` +
		`|{% for s in items %}{{ s.name }}{{ g }};{% endfor %}` +
		`|{% for s in items %}{% if s.n == 3 %}{% break %}{% endif %}{% if s.n == 5 %}{% continue %}{% endif %}{{ s.name }}.{% endfor %}` +
		`|{% for h in hosts %}{% if h.startswith("x") %}<{{ h }}>{% else %}{{ h }}{% endif %}{% endfor %}` +
		`|{% set seen = [] %}{% for s in items if s.name not in seen %}{% do seen.append(s.name) %}{{ s.name }}{% endfor %}` +
		`|{% for s in (items|selectattr("on")|list) + (items|rejectattr("on")|list) if s.n > 2 or not only %}{{ s.name }}{% if s.on %}+{% endif %}{% endfor %}`,
}

// stretchWorld is the items the templates read, changed step by step.
type stretchWorld struct {
	rng    *rand.Rand
	shapes record.Shapes
	items  []any
	hosts  []any
	next   int
	flag   bool
}

func (w *stretchWorld) item() any {
	w.next++
	ports := []any{int64(80)}
	if w.rng.IntN(2) == 0 {
		ports = append(ports, int64(8000+w.next))
	}
	return record.Of(&w.shapes, map[string]any{"name": fmt.Sprintf("s%d", w.rng.IntN(3*w.next)), "on": w.rng.IntN(3) > 0,
		"n": int64(w.rng.IntN(40)), "ports": ports})
}

// step changes the world and says how; vars are what the templates then read.
func (w *stretchWorld) step() (string, map[string]any) {
	g, what := "g", ""
	switch k := w.rng.IntN(8); k {
	case 0, 1, 2, 3, 4:
		w.items, what = changeItems(w.rng, k, w.items, w.item)
	case 5:
		w.flag = !w.flag
		what = "the filter's name of outside changed"
	case 6:
		g = "G"
		what = "a name read by a body changed"
	case 7:
		w.hosts[w.rng.IntN(len(w.hosts))] = fmt.Sprint([]string{"x", "y"}[w.rng.IntN(2)], w.rng.IntN(100))
		what = "a string changed"
	}
	return what, map[string]any{"items": slices.Clone(w.items), "hosts": slices.Clone(w.hosts), "flag": w.flag, "g": g}
}

func TestStretchesRenderAsAfresh(t *testing.T) {
	p, err := Compile(stretchTemplates, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		w := &stretchWorld{rng: rand.New(rand.NewPCG(seed, 11))}
		for range 60 {
			w.items = append(w.items, w.item())
		}
		for i := range 40 {
			w.hosts = append(w.hosts, fmt.Sprint([]string{"x", "y"}[i%2], i))
		}
		w.hosts[5], w.hosts[6] = Secret("pw5"), Secret("xpw6") // kept with their spans: not stretched
		k := newKeptRenders(t, func(vars map[string]any, mods *Modules) string { return renderSecret(t, p, vars, mods) })
		counts := map[string]int{}
		for i := range 150 {
			what, vars := w.step()
			counts[what]++
			k.step(vars, "seed %d, step %d (%s)", seed, i, what)
		}
		// Four loops may stretch, over about 60 items (the break's loop stops early): most of
		// 150 renders' iterations are written by stretches, most filter results taken quick.
		if n := k.cache.bodies.stretched; n < 150*60 {
			t.Errorf("seed %d: %d iterations stretched, want most of 150 renders' (%v)", seed, n, counts)
		}
		if n := k.cache.bodies.filterQuick; n < 150*60 {
			t.Errorf("seed %d: %d filter results taken quick, want most of 150 renders' (%v)", seed, n, counts)
		}
		t.Logf("seed %d: %d iterations stretched, %d filter results quick (%v)", seed, k.cache.bodies.stretched, k.cache.bodies.filterQuick, counts)
	}
}

// Which loops stretch: those whose body reads its one loop variable only.
func TestStretchable(t *testing.T) {
	for loop, want := range map[string]bool{
		"{% for s in items %}{% if s.on %}{{ s.name }}{% endif %}{% endfor %}":                        true,
		"{% for s in items if s.on or not g %}{% set x = s.name %}{{ x }}{% endfor %}":                true,
		"{% for s in items %}{{ s.name }}{{ g }}{% endfor %}":                                         false, // a name of outside
		"{% for s in items %}{% if loop.first %}{{ s.name }}{% endif %}{% endfor %}":                  false, // the position
		"{% for k, v in pairs %}{% if v %}{{ k }}{% endif %}{% endfor %}":                             false, // two names
		"{% for s in items %}{% if s.on %}{{ s.get('name') }}{{ s.get('n') }}{% endif %}{% endfor %}": true,  // the loop variable is read whole all the same
	} {
		p, err := Compile(map[string]string{"t": loop}, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		var cache ModuleCache
		items := []any{}
		for i := range 20 {
			items = append(items, record.Of(nil, map[string]any{"name": fmt.Sprint("s", i), "on": i%2 == 0, "n": int64(i)}))
		}
		pairs := []any{}
		for i := range 20 {
			pairs = append(pairs, []any{fmt.Sprint("k", i), int64(i)})
		}
		vars := map[string]any{"items": items, "pairs": pairs, "g": "g"}
		for range 2 {
			if _, err := p.RenderSharing(t.Context(), vars, Limits{}, nil, &Modules{Across: &cache}, false); err != nil {
				t.Fatal(err)
			}
			cache.Sweep()
		}
		if got := cache.bodies.stretched > 0; got != want {
			t.Errorf("%s: stretched %d, want some: %v", loop, cache.bodies.stretched, want)
		}
	}
}

// Stretches and quick filter results next to what could fool them: the loop variable set
// again in the body, a filter reading an outer loop's variable or position, a loop run in a
// macro under autoescape and not, in an order that changes, a recursive loop. Each is
// rendered through kept iterations and afresh, step after step.
func TestStretchesBesideWhatCouldFoolThem(t *testing.T) {
	items := func(names ...string) []any {
		var out []any
		for i, n := range names {
			out = append(out, record.Of(nil, map[string]any{"name": n, "n": int64(i % 7), "kids": []any{map[string]any{"name": n + "k"}}}))
		}
		return out
	}
	base := items("a", "b", "<c>", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t")
	changed := slices.Clone(base)
	changed[4] = items("E")[0]
	steps := []map[string]any{
		{"items": base, "outer": []any{int64(1), int64(3), int64(5)}, "esc": true},
		{"items": base, "outer": []any{int64(1), int64(4), int64(5)}, "esc": true},
		{"items": changed, "outer": []any{int64(1), int64(4), int64(5)}, "esc": false},
		{"items": changed, "outer": []any{int64(2), int64(4)}, "esc": false},
		{"items": base, "outer": []any{int64(2), int64(4)}, "esc": true},
		{"items": base, "outer": []any{int64(2), int64(4)}, "esc": true},
	}
	for name, src := range map[string]string{
		"the loop variable set again":               `{% for s in items %}{{ s.name }}{% set s = {"name": "x"} %}{{ s.name }},{% endfor %}`,
		"a filter reading an outer loop's variable": `{% for o in outer %}[{% for s in items if s.n > o %}{{ s.name }}{% if s.n %}+{% endif %}{% endfor %}]{% endfor %}`,
		"a filter reading an outer loop's position": `{% for o in outer %}[{% for s in items if s.n > loop.index %}{{ s.name }}{% if s.n %}+{% endif %}{% endfor %}]{% endfor %}`,
		"a loop in a macro, escaped and not, in turn": `{% macro m() %}{% for s in items %}{% if s.n %}{{ s.name }}{% endif %}{% endfor %}{% endmacro %}` +
			`{% if esc %}{% autoescape true %}{{ m() }}{% endautoescape %}|{{ m() }}{% else %}{{ m() }}|{% autoescape true %}{{ m() }}{% endautoescape %}{% endif %}`,
		"a recursive loop":         `{% for s in items recursive %}{% if s.name %}{{ s.name }}{% endif %}{% if s.kids %}({{ loop(s.kids) }}){% endif %}{% endfor %}`,
		"nested loops of the item": `{% for s in items %}{% for k in s.kids %}{% if loop.first %}{{ s.name }}{{ k.name }}{% endif %}{% endfor %}{% endfor %}`,
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Compile(map[string]string{"t": src}, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := newKeptRenders(t, func(vars map[string]any, mods *Modules) string { return renderSecret(t, p, vars, mods) })
			for i, vars := range steps {
				k.step(vars, "step %d", i)
			}
		})
	}
}

// changeItems makes change k of a list of items: 0 nothing, 1 an item added, 2 one deleted
// (not the last one), 3 one replaced, 4 two swapped. It says which.
func changeItems(rng *rand.Rand, k int, items []any, item func() any) ([]any, string) {
	n := len(items)
	switch k {
	case 1:
		return slices.Insert(items, rng.IntN(n+1), item()), "an item added"
	case 2:
		if n > 1 {
			i := rng.IntN(n)
			items = slices.Delete(items, i, i+1)
		}
		return items, "an item deleted"
	case 3:
		if n > 0 {
			items[rng.IntN(n)] = item()
		}
		return items, "an item replaced"
	case 4:
		if n > 1 {
			i, j := rng.IntN(n), rng.IntN(n)
			items[i], items[j] = items[j], items[i]
		}
		return items, "two items swapped"
	}
	return items, "nothing"
}
