package jinja

import (
	"reflect"
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A loop's filter ({% for s in services if s.ssl or not ssl_only %}) is kept per item from one
// render to the next, as the iterations are (reuse_body.go): whether an item passes is a
// function of the filter and of the values of the names it reads. An item whose reads are
// the same as those of the item at the same place of the same run in the last render passes
// as it did, without evaluating the filter: reading each of 10,000 services' maps costs more
// than comparing it with the one kept (the same map, or one found the same by an iteration
// already). The filter still runs when it would without a cache (as the loop reaches the item,
// or ahead of it: lazy_filter.go), and the reads are looked up then: an answer is never taken
// for reads the body changed since (and the values a template can change, its dicts, lists
// and namespaces, are not kept: readsOwn); an error is the same error. Not kept: a filter that
// reads the loop object, changes what it reads, or reads what cannot be compared.

// filterLoop is what is kept of one loop's filter.
type filterLoop struct {
	names             []string
	ok                bool
	refused           int
	runs[filterEntry] // per run of the loop in a render: each item's reads and result
}

type filterEntry struct {
	vals []any // nil: not kept
	pass bool
}

// filterRun is one run of a loop's filter.
type filterRun struct {
	c      *bodyCache
	fl     *filterLoop
	k      int
	hints  []filterEntry
	offset int
	list   []filterEntry
	reads  []any
	// tgt: the index in fl.names of the loop's one plain variable (-1: none, or a tuple);
	// outer: the other names' values, looked up at the run's first quick look (outerBad:
	// one is a value the template may change, or the loop object: no quick look).
	tgt      int
	outer    []any
	outerBad bool
	quicks   int // results taken by quick (bodyCache.filterQuick)
}

// minFilterKept is how many items a loop must have for its filter's results to be kept: the
// condition is one expression, and what keeping costs per run (the run, its list, the reads
// looked up) is more than it saves over a few items (the Ingress and HTTPRoute examples' loops
// over an object's ports, slices and endpoints: thousands of runs of one to three items).
const minFilterKept = 16

// filterRun returns the run of s's filter whose results may be kept; nil when not.
func (e *evaluator) filterRun(s *parse.ForStmt) *filterRun {
	if s.Filter == nil || e.shared == nil || e.shared.Across == nil || e.bodies.off() {
		return nil
	}
	e.bodyState()
	c := &e.shared.Across.bodies
	c.mu.Lock()
	defer c.mu.Unlock()
	key := bodyKey{e.prog, s}
	fl := c.filters[key]
	if fl == nil {
		w := bodyWalk{freeWalk: freeWalk{seen: map[string]bool{}, bound: map[string]int{}, ok: true}}
		w.walk(reflect.ValueOf(s.Filter))
		ok := w.ok && !w.loop && !w.seen["self"] && !w.seen["super"] && !w.seen["forloop"] && !key.prog.testsIdentity()
		fl = &filterLoop{names: w.names, ok: ok}
		if c.filters == nil {
			c.filters = map[bodyKey]*filterLoop{}
		}
		c.filters[key] = fl
	}
	fl.ran = true
	if !fl.ok || fl.refused >= maxRefused {
		return nil
	}
	if e.bodies.filterRuns == nil {
		e.bodies.filterRuns = map[*filterLoop]int{}
	}
	k := e.bodies.filterRuns[fl]
	e.bodies.filterRuns[fl] = k + 1
	hints := fl.hints(k)
	tgt := -1
	if v := plainLoopVar(s.Target); v != "" {
		tgt = slices.Index(fl.names, v)
	}
	return &filterRun{c: c, fl: fl, k: k, hints: hints, list: make([]filterEntry, 0, len(hints)), tgt: tgt}
}

// quick is the kept result of item, without running the filter or looking its names up, when
// the last render's run kept, at the same place, a result for the very same item (sameItem)
// and for the very values the filter's other names hold now; ok is false otherwise. Those
// other names are looked up once per run: the body cannot set them where the filter reads
// them (its frame is its own), and a value it could change in place (a dict, list or
// namespace of the template) or the loop object turns the quick look off. The default
// template's rules loop over 10,000 services tested each one's filter through a lookup of
// every name and the locked cache.
func (r *filterRun) quick(e *evaluator, f *frame, item any) (pass, ok bool) {
	if r == nil || r.tgt < 0 || r.outerBad {
		return false, false
	}
	j := len(r.list) + r.offset
	if j < 0 || j >= len(r.hints) {
		return false, false
	}
	n := len(r.fl.names)
	if r.outer == nil {
		r.outer = make([]any, n)
		for k, name := range r.fl.names {
			if k == r.tgt {
				continue
			}
			v, found := e.lookup(f.parent, name)
			if !found {
				v = notSet{}
			} else if !immutableValue(v) {
				r.outerBad = true
				return false, false
			}
			r.outer[k] = v
		}
	}
	r.c.mu.Lock() // another render may be comparing the kept results (bodyCache.sameIn)
	defer r.c.mu.Unlock()
	ent := r.hints[j]
	if len(ent.vals) != n+1 || ent.vals[n] != any(e.autoescape) || !sameItem(ent.vals[r.tgt], item) {
		return false, false
	}
	for k, v := range r.outer {
		if k != r.tgt && !sameItem(ent.vals[k], v) && !sameWord(ent.vals[k], v) {
			return false, false
		}
	}
	r.list = append(r.list, ent)
	r.quicks++
	return ent.pass, true
}

// cond is whether the item whose loop variables f holds passes the filter.
func (r *filterRun) cond(e *evaluator, s *parse.ForStmt, f *frame) (bool, error) {
	i := len(r.list)
	vals := r.reads[:0]
	for _, n := range r.fl.names {
		v, ok := e.lookup(f, n)
		if !ok {
			v = notSet{}
		}
		vals = append(vals, v)
	}
	vals = append(vals, e.autoescape)
	r.reads = vals
	if readsOwn(vals) {
		// A dict, list or namespace the template made is compared item by item: that costs
		// more than the condition (the HTTPRoute example's `for t in m.targets if fe.name in
		// t.frontends`, 3,000 targets for each frontend). Not tried again.
		r.c.mu.Lock()
		r.fl.refused = maxRefused
		r.c.mu.Unlock()
		r.list = append(r.list, filterEntry{})
		return e.cond(s.Filter, f)
	}
	if ent, ok := r.find(vals, i); ok {
		r.list = append(r.list, ent)
		return ent.pass, nil
	}
	snap, ok := copyReads(vals, nil)
	pass, err := e.cond(s.Filter, f)
	if err != nil {
		return pass, err
	}
	if ok && bodySameAll(snap, vals) {
		r.list = append(r.list, filterEntry{vals: snap, pass: pass})
		return pass, nil
	}
	r.list = append(r.list, filterEntry{})
	r.c.mu.Lock()
	r.fl.refused++
	r.c.mu.Unlock()
	return pass, nil
}

// find is the kept result of the item at i+offset in the last render's run, or of one next to
// it (an item added or deleted before: the items after it are found again).
func (r *filterRun) find(vals []any, i int) (filterEntry, bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for _, d := range [...]int{0, 1, -1} {
		j := i + r.offset + d
		if j < 0 || j >= len(r.hints) || r.hints[j].vals == nil {
			continue
		}
		ent := &r.hints[j]
		if r.c.same(ent.vals, vals) {
			r.offset += d
			return *ent, true
		}
	}
	return filterEntry{}, false
}

// done ends the run: its results are where the same run of the next render looks.
func (r *filterRun) done() {
	if r == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.filterQuick += r.quicks
	r.fl.put(r.k, r.list)
}

// sweepFilters ends a render for the loops' filters: a loop that did not run is forgotten.
func (c *bodyCache) sweepFilters() {
	for key, fl := range c.filters {
		if !fl.turn() {
			delete(c.filters, key)
		}
	}
}

// readsOwn says whether vals hold a dict, list, namespace or tuple the template made.
func readsOwn(vals []any) bool {
	for _, v := range vals {
		switch v.(type) {
		case *Dict, *List, *Namespace, Tuple:
			return true
		}
	}
	return false
}
