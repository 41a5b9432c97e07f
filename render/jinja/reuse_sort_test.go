package jinja

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// seqTemplates merge the items their blocks' parts (imported in a loop, kept and lent) made
// and sort and dedupe them in every way sort and unique can be patched, and a few they
// cannot: keys by attribute and path, ints and strings, case folded or not, reversed, tied.
// mut names an item of the parts changed in place before they are sorted (-1: none), after
// one changed after.
var seqTemplates = map[string]string{
	"t": `{% set all, names = [], [] %}` +
		`{% for blk in blocks %}{% import "part" as p with context %}{% do all.extend(p.items) %}{% do names.extend(p.names) %}{% endfor %}` +
		`{% if mut >= 0 and mut < all|length %}{% if mutWhat == "key" %}{% do all[mut].update({"k": mutKey}) %}` +
		`{% elif mutWhat == "path" %}{% do all[mut].sub.insert(0, mutKey) %}{% else %}{% do all[mut].update({"n": 7}) %}{% endif %}{% endif %}` +
		"k: {{ all|sort(attribute='k')|map(attribute='id')|join(',') }}\n" +
		"k reverse: {{ all|sort(attribute='k', reverse=true)|map(attribute='id')|join(',') }}\n" +
		"k case: {{ all|sort(attribute='k', case_sensitive=true)|map(attribute='id')|join(',') }}\n" +
		"n: {{ all|sort(attribute='n')|map(attribute='id')|join(',') }}\n" +
		"n reverse: {{ all|sort(attribute='n', reverse=true)|map(attribute='id')|join(',') }}\n" +
		"path: {{ all|sort(attribute='sub.0')|map(attribute='id')|join(',') }}\n" +
		"unique k: {{ all|unique(attribute='k')|map(attribute='id')|join(',') }}\n" +
		"unique k case: {{ all|unique(true, attribute='k')|map(attribute='id')|join(',') }}\n" +
		"unique sorted: {{ all|unique(attribute='k')|sort(attribute='k')|sort(attribute='n', reverse=true)|map(attribute='id')|join(',') }}\n" +
		"names: {{ names|unique|join(',') }} {{ names|sort|join(',') }} {{ names|sort(reverse=true, case_sensitive=true)|join(',') }}\n" +
		"{% set out = all|sort(attribute='k') %}{% do out.append(none) %}changed: {{ out|length }}\n" +
		"{% for xs in [all, all|reverse|list, all[:mut], all, all[3:]] %}loop: {{ xs|sort(attribute='k')|map(attribute='id')|join(',') }}\n{% endfor %}" +
		`{% if after >= 0 and after < all|length %}{% do all[after].update({"k": "after"}) %}{% endif %}`,
	"part": `{% set items, names = [], [] %}{% for r in blk %}` +
		`{% do items.append({"k": r.k, "n": r.n, "id": r.id, "sub": [r.k2]}) %}{% do names.append(r.k) %}{% endfor %}`,
}

// seqWorld is the blocks of records the templates read, changed step by step.
type seqWorld struct {
	rng    *rand.Rand
	blocks [][]any
	next   int
}

func (w *seqWorld) record() map[string]any {
	keys := []string{"a", "A", "b", "B", "c", "ab", "aB", "Ab", ""}
	w.next++
	return map[string]any{"k": keys[w.rng.IntN(len(keys))], "k2": keys[w.rng.IntN(len(keys))],
		"n": int64(w.rng.IntN(6)), "id": int64(w.next)}
}

func (w *seqWorld) block() []any {
	var b []any
	for range w.rng.IntN(14) {
		b = append(b, w.record())
	}
	return b
}

// step changes the world and says how; vars are what the templates then read.
func (w *seqWorld) step() (string, map[string]any) {
	vars := map[string]any{"mut": int64(-1), "mutWhat": "", "mutKey": "", "after": int64(-1)}
	if w.rng.IntN(4) == 0 {
		vars["after"] = int64(w.rng.IntN(100))
	}
	what := ""
	switch n := len(w.blocks); w.rng.IntN(9) {
	case 0:
		what = "nothing"
	case 1:
		i := w.rng.IntN(n + 1)
		w.blocks = slices.Insert(w.blocks, i, w.block())
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
	case 5, 6:
		vars["mut"] = int64(w.rng.IntN(200))
		vars["mutWhat"] = []string{"key", "path", "n"}[w.rng.IntN(3)]
		vars["mutKey"] = []string{"0", "zz", "A", "a"}[w.rng.IntN(4)]
		what = "an item changed in place"
	case 7:
		for i := range w.blocks {
			w.blocks[i] = w.block()
		}
		what = "every block replaced"
	default:
		for range 3 {
			w.blocks[w.rng.IntN(n)] = w.block()
		}
		what = "three blocks replaced"
	}
	blocks := make([]any, len(w.blocks))
	for i, b := range w.blocks {
		blocks[i] = b
	}
	vars["blocks"] = blocks
	return what, vars
}

// sort and unique, patched from their last calls along a random sequence of changes (blocks
// added, deleted, replaced, swapped; the parts' items changed in place before they are
// sorted, which must be seen), render every step as a fresh render does; many calls are
// patched.
func TestSortAndUniquePatchedRenderAsAfresh(t *testing.T) {
	p, err := Compile(seqTemplates, "t", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		w := &seqWorld{rng: rand.New(rand.NewPCG(seed, 3))}
		for range 14 {
			w.blocks = append(w.blocks, w.block())
		}
		k := newKeptRenders(t, renderOf(t, p))
		counts := map[string]int{}
		for i := range 150 {
			what, vars := w.step()
			counts[what]++
			k.step(vars, "seed %d, step %d (%s)", seed, i, what)
		}
		patched := k.cache.SeqPatched()
		if patched < 150*4 {
			t.Errorf("seed %d: %d calls patched, want a good part of 150 renders' 17 (%v)", seed, patched, counts)
		}
		t.Logf("seed %d: %d calls patched (%v)", seed, patched, counts)
	}
}

// seqState's decisions: what a call patches, and when it computes all again; each output
// is the one computed afresh.
func TestSortAndUniquePatchDecisions(t *testing.T) {
	// The items are l's, but for a run of 10 of other's (as the parts' items of the Ingress
	// example: a loan per block).
	var l, other loan
	owned := func(n int, tag string) []any {
		var out []any
		for i := range n {
			owner := &l
			if i >= 5 && i < 15 {
				owner = &other
			}
			out = append(out, &List{items: []any{fmt.Sprintf("%s%03d", tag, (i*37)%n), int64(i % 5)}, owner: owner})
		}
		return out
	}
	base := owned(200, "k")
	same := func() []any { return base }
	for _, c := range []struct {
		name    string
		next    func() []any
		prep    func() // after the first call
		args    seqArgs
		patched bool
	}{
		{"the same items", same, nil, seqArgs{}, true},
		{"a run replaced", func() []any { return slices.Concat(base[:50], owned(10, "x"), base[60:]) }, nil, seqArgs{}, true},
		{"runs added and deleted", func() []any {
			return slices.Concat(owned(3, "y"), base[:20], base[25:120], owned(7, "x"), base[120:190])
		}, nil, seqArgs{}, true},
		{"two items swapped", func() []any {
			out := slices.Clone(base)
			out[10], out[150] = out[150], out[10]
			return out
		}, nil, seqArgs{}, true},
		{"other arguments", same, nil, seqArgs{reverse: true}, false},
		{"most items new", func() []any { return slices.Concat(base[:50], owned(150, "x")) }, nil, seqArgs{}, false},
		{"the items' loan spoiled", same, func() { l.spoil() }, seqArgs{}, false},
		{"the items nobody's", same, nil, seqArgs{}, false},
		{"an item changed in place", same, func() {
			it := base[7].(*List)
			it.changing()
			it.items = []any{"a", int64(9)}
		}, seqArgs{}, true},
	} {
		for _, unique := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, " unique=", unique), func(t *testing.T) {
				l, other = loan{}, loan{}
				base = owned(200, "k")
				if c.name == "the items nobody's" {
					for _, it := range base {
						it.(*List).owner = nil
					}
				}
				key := func(x any) (any, error) { return x.(*List).items[0], nil }
				if !unique {
					key = func(x any) (any, error) { return x.(*List).items[1], nil }
				}
				e := &evaluator{}
				first := &seqState{args: seqArgs{unique: unique}}
				if !first.full(base, key, &seqScratch{}) {
					t.Fatal("not computed")
				}
				if c.prep != nil {
					c.prep()
				}
				args := c.args
				args.unique = unique
				sc := &seqCall{last: first, args: args, sc: &seqScratch{}}
				items := c.next()
				st, patched, ok := sc.compute(e, items, key)
				if !ok || patched != c.patched {
					t.Fatalf("ok %v, patched %v; want true, %v", ok, patched, c.patched)
				}
				fresh := &seqState{args: args}
				fresh.full(items, key, &seqScratch{})
				if !slices.Equal(st.order, fresh.order) {
					t.Errorf("output %v, computed afresh %v", st.order, fresh.order)
				}
			})
		}
	}
}

// differ matches runs of the same items, in order, and notes the others as changes.
func TestDifferMatchesRuns(t *testing.T) {
	items := func(s string) []any {
		var out []any
		for _, c := range s {
			out = append(out, string(c))
		}
		return out
	}
	for _, c := range []struct {
		old, cur string
		from     string // per item of cur: the letter of old it matched, or -
		changed  int
	}{
		{"abcdefgh", "abcdefgh", "abcdefgh", 0},
		{"abcdefgh", "abXYefgh", "ab--efgh", 4},
		{"abcdefghijklmnop", "aXcdefghijklmnoZp", "a-cdefghijklmno-p", 3},
		{"abcdefghijklmnop", "bcdefghijklmnop", "bcdefghijklmnop", 1},
		{"abcdefghijklmnop", "abcdeXYZfghijkmnop", "abcde---fghijkmnop", 4},
		{"abcdefghijklmnop", "ponmlkjihgfedcba", "", -1}, // too many changes
	} {
		old, cur := items(c.old), items(c.cur)
		n := max(len(old), len(cur))
		d := differ{old: old, cur: cur, from: make([]int32, len(cur)), limit: n/4 + 2, work: 8*n + 64}
		ok := d.match(0, len(old), 0, len(cur))
		if c.changed < 0 {
			if ok {
				t.Errorf("%s -> %s: matched, want too many changes", c.old, c.cur)
			}
			continue
		}
		var got strings.Builder
		for _, o := range d.from {
			if o < 0 {
				got.WriteByte('-')
			} else {
				got.WriteString(old[o].(string))
			}
		}
		if !ok || got.String() != c.from || d.changed != c.changed {
			t.Errorf("%s -> %s: %v %s, %d changes; want %s, %d", c.old, c.cur, ok, got.String(), d.changed, c.from, c.changed)
		}
	}
}

// An item is matched again only when it cannot change unseen: immutable, or a dict or list
// one loan, not spoiled, owns whole (a list inside of nobody's could change without spoiling it).
func TestSeqItemsOwnedWhole(t *testing.T) {
	var l, other loan
	inner := &List{items: []any{"x"}}
	outer := &Dict{keys: []any{"refs"}, vals: []any{inner}, owner: &l}
	for _, c := range []struct {
		name  string
		item  any
		inner *loan
		ok    bool
	}{
		{"a string", "s", nil, true},
		{"an int", int64(1), nil, true},
		{"a tuple", Tuple{"a"}, nil, false},
		{"a list of nobody's", &List{items: []any{"a"}}, nil, false},
		{"nobody's inside", outer, nil, false},
		{"another's inside", outer, &other, false},
		{"the loan's whole", outer, &l, true},
	} {
		inner.owner = c.inner
		owner, _, ok := ownerFor(c.item)
		if ok != c.ok || ok && c.item == outer && owner != &l {
			t.Errorf("%s: %v, %v; want %v", c.name, owner, ok, c.ok)
		}
	}
	inner.owner = &l
	l.spoil()
	if _, _, ok := ownerFor(outer); ok {
		t.Error("a spoiled loan's: matched again")
	}
}

// A patched call reads no matched item's owner again: it trusts a run of items a loan owned
// whole while the loan is not spoiled and disowned none since (loan.disowns). Each way an
// item can stop being its loan's and then change without spoiling it must be seen: the item
// disowned, a list inside it disowned, the item taken by another loan (whose spoiling the
// first does not see). The items are of 20 loans (as the Ingress example's blocks' parts):
// the call is patched, the loan's other items computed again.
func TestSeqPatchSeesDisowns(t *testing.T) {
	var loans [20]*loan
	var base []any
	setup := func() {
		base = base[:0]
		for i := range loans {
			loans[i] = &loan{}
		}
		for i := range 200 {
			l := loans[i/10]
			sub := &List{items: []any{fmt.Sprintf("k%02d", i%50)}, owner: l}
			base = append(base, &List{items: []any{int64(i), sub}, owner: l})
		}
	}
	subOf := func(x any) *List { return x.(*List).items[1].(*List) }
	key := func(x any) (any, error) { return subOf(x).items[0], nil }
	rekey := func(x any) { // a change in place, spoiling whoever owns the list then
		sub := subOf(x)
		sub.changing()
		sub.items = []any{"k00"}
	}
	for _, c := range []struct {
		name string
		prep func(it *List, l *loan)
	}{
		{"the item changed (its loan spoiled)", func(it *List, l *loan) { rekey(it) }},
		{"the item disowned, then changed", func(it *List, l *loan) { disown(it, l); rekey(it) }},
		{"a list inside disowned, then changed", func(it *List, l *loan) { disown(subOf(it), l); rekey(it) }},
		{"the item taken by another loan, then changed", func(it *List, l *loan) {
			disown(it, l)
			if !watch(it, &loan{}) {
				t.Fatal("not taken")
			}
			rekey(it)
		}},
	} {
		for _, unique := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, " unique=", unique), func(t *testing.T) {
				setup()
				args := seqArgs{unique: unique}
				first := &seqState{args: args}
				if !first.full(base, key, &seqScratch{}) {
					t.Fatal("not computed")
				}
				before := slices.Clone(first.order)
				c.prep(base[33].(*List), loans[3])
				sc := &seqCall{last: first, args: args, sc: &seqScratch{}}
				st, patched, ok := sc.compute(&evaluator{}, base, key)
				if !ok || !patched {
					t.Fatalf("ok %v, patched %v; want both", ok, patched)
				}
				fresh := &seqState{args: args}
				fresh.full(base, key, &seqScratch{})
				if slices.Equal(fresh.order, before) {
					t.Fatal("the change changes nothing: no test")
				}
				if !slices.Equal(st.order, fresh.order) {
					t.Errorf("output %v, computed afresh %v", st.order, fresh.order)
				}
			})
		}
	}
}

// BenchmarkSeqPatch: a patched sort and unique of 30,000 items of 160 loans (the Ingress
// example's routes merged from its blocks' parts), one block's items replaced.
func BenchmarkSeqPatch(b *testing.B) {
	var base []any
	for blk := range 160 {
		l := &loan{}
		for i := range 190 {
			k := fmt.Sprintf("k%05d", (blk*7919+i*104729)%30000)
			base = append(base, &Dict{keys: []any{"key"}, vals: []any{k}, owner: l})
		}
	}
	key := func(x any) (any, error) { return x.(*Dict).vals[0], nil }
	next := slices.Clone(base)
	for i := 80 * 190; i < 81*190; i++ {
		next[i] = &Dict{keys: []any{"key"}, vals: []any{fmt.Sprintf("n%05d", i)}, owner: &loan{}}
	}
	for _, unique := range []bool{false, true} {
		b.Run(fmt.Sprint("unique=", unique), func(b *testing.B) {
			args := seqArgs{unique: unique}
			st := &seqState{args: args}
			if !st.full(base, key, &seqScratch{}) {
				b.Fatal("not computed")
			}
			sc := &seqCall{last: st, args: args, sc: &seqScratch{}}
			in := [2][]any{next, base}
			for i := 0; b.Loop(); i++ {
				items := in[i%2]
				st, patched, ok := sc.compute(&evaluator{}, items, key)
				if !ok || !patched {
					b.Fatal("not patched")
				}
				out := make([]any, len(st.order))
				for k, j := range st.order {
					out[k] = items[j]
				}
				sc.last = st
				clear(sc.sc.keys)
			}
		})
	}
}
