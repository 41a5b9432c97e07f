package jinja

import (
	"slices"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A module imported in a loop (reuse_loop.go) may itself import other templates with context,
// by their keys (a block of 64 routes importing each route's part): it is kept too. What it
// reads is what its own source reads and what the templates it imports read (their free names,
// walked when its own are, recursively, maxNestedImports deep), but for the names it binds
// where it imports them (its loop's variables, what it set before: stmts): the imported
// template reads those of its frames, whose values are a function of what it reads itself. A
// block may then set a name its importer sets too, and changes as the blocks merge, without
// reading the importer's. An include, an import without context, a cycle or one too deep:
// never kept.
//
// The keyed reads of the templates it imports (X.get(KEY)) are its keyed reads: their get calls
// are its sites too (freeInfo.nested, by template key), so that its recorder notes what they
// look up while it is computed; an imported module computed then has its own recorder, whose
// lookups go on to the block's (keyRecorder.outer); one taken from the cache adds the lookups
// it was kept with (adopt). A change of a Service a route's part looked up computes the block
// again.

// maxNestedImports bounds how deep imports inside a kept module are followed.
const maxNestedImports = 4

// depSrc is a template a module imports (at any depth), with the source its walk read.
type depSrc struct{ key, src string }

// imported walks the template key that the walked one imports (with context or not), and
// makes what it reads read by the walked one, where the names the walked one binds there are
// bound (its own bindings too: stmts).
func (w *freeWalk) imported(key string, withContext bool) {
	if !withContext || len(w.stack) >= maxNestedImports || slices.Contains(w.stack, key) {
		w.ok = false // without context: kept per render (e.modules), not followed
		return
	}
	t := w.resolve(key)
	if t == nil || t.Extends || len(t.Blocks) > 0 {
		w.ok = false
		return
	}
	sub := freeWalk{seen: map[string]bool{}, bound: boundNow(w.bound), ok: true, chains: true,
		resolve: w.resolve, stack: append(slices.Clone(w.stack), key), tmpl: key}
	sub.stmts(t.Body, sub.walk) // what it sets at its top before reading it is its own
	if !sub.ok || sub.seen["self"] || sub.seen["super"] {
		w.ok = false
		return
	}
	w.merge(&sub)
	if !slices.ContainsFunc(w.deps, func(d depSrc) bool { return d.key == key }) {
		w.deps = append(w.deps, depSrc{key: key, src: t.Src})
	}
	for _, d := range sub.deps {
		if !slices.ContainsFunc(w.deps, func(o depSrc) bool { return o.key == d.key }) {
			w.deps = append(w.deps, d)
		}
	}
}

// boundNow is a copy of the names bound in bound (a walk's, where an import is).
func boundNow(bound map[string]int) map[string]int {
	out := make(map[string]int, len(bound))
	for n, c := range bound {
		if c > 0 {
			out[n] = c
		}
	}
	return out
}

// merge makes the names sub read read by w, as sub uses them (whole, chains, keyed), bound in
// w or not, and its get calls w's.
func (w *freeWalk) merge(sub *freeWalk) {
	for _, n := range sub.names {
		w.note(n)
		u, wu := sub.uses[n], w.use(n)
		if u == nil {
			wu.whole = true
			continue
		}
		wu.whole = wu.whole || u.whole
		for _, c := range u.chains {
			if !slices.ContainsFunc(wu.chains, func(o []string) bool { return slices.Equal(o, c) }) {
				wu.chains = append(wu.chains, c)
			}
		}
		for _, k := range u.keyed {
			if !slices.ContainsFunc(wu.keyed, func(o []string) bool { return slices.Equal(o, k) }) {
				wu.keyed = append(wu.keyed, k)
			}
		}
	}
	w.sites = append(w.sites, sub.sites...)
}

// nestedSite notes the get call s of an imported template as the keyed read i.
func (w *freeWalk) nestedSite(s keyedSite, i int) {
	if w.nestedSites == nil {
		w.nestedSites = map[string]map[int]int{}
	}
	m := w.nestedSites[s.tmpl]
	if m == nil {
		m = map[int]int{}
		w.nestedSites[s.tmpl] = m
	}
	m[s.pos] = i
}

// sourcesOf is src, and the sources of deps: what a module kept is kept with.
func sourcesOf(src string, deps []depSrc) string {
	if len(deps) == 0 {
		return src
	}
	var b strings.Builder
	b.WriteString(src)
	for _, d := range deps {
		b.WriteByte(0)
		b.WriteString(d.key)
		b.WriteByte(0)
		b.WriteString(d.src)
	}
	return b.String()
}

// treeOf is the tree of the template key; nil when there is none (or it does not compile).
func (p *Program) treeOf(key string) *parse.Tree {
	t := p.templates[key]
	if t == nil || t.tree == nil || p.errs[key] != nil {
		return nil
	}
	return t.tree
}

// sameDeps says whether the templates of deps have the same sources in p.
func (p *Program) sameDeps(deps []depSrc) bool {
	for _, d := range deps {
		t := p.treeOf(d.key)
		if t == nil || t.Src != d.src {
			return false
		}
	}
	return true
}

// noteAt records the lookup get(args...) on obj at the call pos of the template cur, for r
// and the recorders of the modules being computed around it (outer).
func (r *keyRecorder) noteAt(cur *Template, pos int, obj any, args []any, kw map[string]any, caller bool) {
	for ; r != nil; r = r.outer {
		if k := r.site(cur, pos, obj); k != nil {
			r.note(k, obj, args, kw, caller)
		}
	}
}

// check makes a keyed read of r's (or of a recorder around it) whose get call at pos is on
// another object than the one read never the same (site), whatever the call does then.
func (r *keyRecorder) check(cur *Template, pos int, obj any) {
	for ; r != nil; r = r.outer {
		r.site(cur, pos, obj)
	}
}

// adopt adds to r, and to the recorders around it, the lookups of the module le kept for an
// import of key (what it reads: fi; its values read now: vals), taken from the cache while r's
// module is computed: what it found is what r's module found.
func (r *keyRecorder) adopt(key string, fi freeInfo, vals []any, le *loopEntry) {
	for ; r != nil; r = r.outer {
		if r.nested == nil {
			continue
		}
		r.adoptSites(r.nested[key], fi.sites, vals, le)
		for k, sites := range fi.nested {
			r.adoptSites(r.nested[k], sites, vals, le)
		}
	}
}

// adoptSites adds, for each get call of sites (the kept module's: its read), the lookups of
// that read to r's read of the same call (mine: r's sites of that template).
func (r *keyRecorder) adoptSites(mine, sites map[int]int, vals []any, le *loopEntry) {
	for pos, j := range sites {
		i, ok := mine[pos]
		if !ok || r.reads[i] == nil || j >= len(le.vals) {
			continue
		}
		k := r.reads[i]
		kr, ok := le.vals[j].(*keyedRead)
		if !ok || kr.stop || !sameObject(vals[j], r.live[i]) {
			k.stop = true // not read where r's module read it, or not comparable: never the same
			continue
		}
		for _, l := range kr.looked {
			if !slices.ContainsFunc(k.looked, func(o lookup) bool { return o.hk == l.hk }) {
				k.looked = append(k.looked, l)
			}
		}
	}
}

// nestKeys is the recorder of lr's computation: its own evaluation's lookups (reuse_keyed.go),
// going on to outer's when outer is that of a module computed around it that imports others
// (else outer records nothing of it).
func (lr *loopRead) nestKeys(outer *keyRecorder) *keyRecorder {
	nesting := outer != nil && outer.nested != nil
	switch {
	case lr.keys != nil && nesting:
		lr.keys.outer = outer
	case lr.keys == nil && nesting:
		return outer
	}
	return lr.keys
}

// notePart notes le, kept for an import in a loop, as a part of the module being computed
// around it, if any.
func (e *evaluator) notePart(le *loopEntry) {
	if n := len(e.computing); n > 0 && le != nil {
		lr := e.computing[n-1]
		if !slices.Contains(lr.parts, le) {
			lr.parts = append(lr.parts, le)
		}
	}
}

// useParts marks le's parts, and theirs, used in the generation gen (c.mu held): the block
// serving, the next Sweep keeps them although no import took them.
func (le *loopEntry) useParts(gen uint64, depth int) {
	if depth > maxNestedImports {
		return
	}
	for _, p := range le.parts {
		if !p.apart {
			p.used = gen
		}
		p.useParts(gen, depth+1)
	}
}

// loopComputed counts an import of key inside a template that computed its module.
func (c *ModuleCache) loopComputed(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.computed == nil {
		c.computed = map[string]int{}
	}
	c.computed[key]++
}

// LoopComputed is how many imports with context inside a template (not at its top) computed
// their module; of the modules keys only. With blocks (a module importing a part per item),
// the items whose parts were neither computed nor taken are those of blocks taken whole.
func (c *ModuleCache) LoopComputed(keys ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range keys {
		n += c.computed[k]
	}
	return n
}
