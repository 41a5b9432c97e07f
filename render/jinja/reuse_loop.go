package jinja

import (
	"hash/maphash"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Imports with context that are not at a template's top (in a loop's body, say: one per
// route) are kept too, several per module, from one render to the next: such a module's values
// are a function of its source and of the values of the names it reads, which are those its
// source names (parse.NameExpr, and the namespace of a `set ns.attr`, but for the names its own
// loops, macros and with blocks bind): it reads nothing else of the importing frames or the
// context (a name it uses only as name.a.b: those chains, reuse_chain.go). When each of those
// has the same value as when a kept module was computed (the same data, compared as
// sameValue does; found by a hash of them), that module serves: lent
// to the render itself (loopReuse; a change of its values spoils it), or a copy. The per-route
// part of the HTTPRoute example is such a module: after a route's change, only that route's is
// computed again. Not in a template set that tests which object a value is (sameas), as
// ModuleCache.
//
// A module is kept only when nothing it did can be seen outside it but its values: the
// values it read are the same after it ran (it changed no dict, list or namespace it was
// given), its values hold none of them (a copy would not be the same object), it names no
// other template, and every value it read can be compared (not a loop object or a macro,
// which read the state of the render). Each read value is kept as a copy taken before the
// module ran, so that what the importing template does to them later does not change what the
// kept module is compared with.

// loopEntry is a module kept for an import with context that is not at a template's top.
type loopEntry struct {
	src  string  // the module's source
	vals []any   // the values read, in freeInfo's order (reads, else names; absent: notSet)
	mod  *module // as its render made it, or a copy: nobody changes it but the render it is lent to (spoiled then)
	used uint64  // the last generation (Sweep) it served or was made in
	// lendable: mod holds no macro or tuple, and its dicts and lists know they are its
	// (owner): it is handed out itself, not copied, to one render at a time (holder).
	lendable bool
	loan     // spoiled: the render it was lent to changed it: it serves no more
	// apart: made by a render apart (Modules.Apart) and used by no other render since: the
	// next Sweep forgets it.
	apart bool
	// made: the module the render it is lent to made, kept as it is (loopKeep): a change of
	// it by that render leaves a copy of it as it was in its place (renewEntry)
	made bool
	// parts: the modules its computation imported in loops and took or made (reuse_nested.go):
	// used when it is, for the next computation of a block beside it to find them.
	parts []*loopEntry
}

// loan is what the dicts and lists of a value know they are part of (their owner): a
// change of one spoils it. onSpoil, when set, runs at the first, before the change is made
// (a kept module's copy on write: ModuleCache.keep).
type loan struct {
	spoiled atomic.Bool
	onSpoil func()
	holder  *evaluator // the render its values are lent to; nil: none (ModuleCache.mu held)
	// whole: its dicts and lists are all its own (or a loan's it depends on), with no macro
	// and no tuple (a lendable loop entry, a kept module shared as a view): a kept module
	// may then hold them as they are, as its dependent (adopter.lean), rather than a copy.
	whole bool
	// retired: a kept module another took the place of: spoiling it makes no copy
	// (onSpoil), and no loan keeps it as a dependent.
	retired atomic.Bool
	// disowns counts the dicts and lists that stopped being its without spoiling it
	// (disown): while it and spoiled are as a reader saw them, every dict and list that was
	// its then still is (reuse_sort.go reads no item's owner again).
	disowns atomic.Uint32
	mu      sync.Mutex
	// deps are the kept modules' loans that hold values of this one's as they are: a change
	// of one of its values spoils them too, before it is made (the HTTPRoute example's model
	// holds its routes' parts' dicts).
	deps []*loan
	// depOn, of a kept module, are the loans whose values it holds as they are, for a render
	// apart to tell that none is lent to another render (ModuleCache.mu held).
	depOn []*loan
}

func (l *loan) spoil() {
	if !l.spoiled.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	deps := l.deps
	l.deps = nil
	l.mu.Unlock()
	for _, d := range deps {
		d.spoil()
	}
	if l.onSpoil != nil && !l.retired.Load() {
		l.onSpoil()
	}
}

// retire marks l as the loan of a kept module that is no longer kept (ModuleCache.mu held):
// a change of its values makes no copy (onSpoil), no loan keeps it as a dependent, and it
// holds none (depOn): the loans whose values it held would otherwise keep it, and its module,
// alive for as long as they are.
func (l *loan) retire() {
	l.retired.Store(true)
	for _, o := range l.depOn {
		o.undepend(l)
	}
	l.depOn = nil
}

// depend makes d spoiled when l is; false when l is spoiled already.
func (l *loan) depend(d *loan) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spoiled.Load() {
		return false
	}
	l.deps = slices.DeleteFunc(l.deps, func(x *loan) bool { return x.spoiled.Load() || x.retired.Load() })
	if !slices.Contains(l.deps, d) {
		l.deps = append(l.deps, d)
	}
	return true
}

// undepend undoes depend.
func (l *loan) undepend(d *loan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deps = slices.DeleteFunc(l.deps, func(x *loan) bool { return x == d })
}

// dependents are the loans that hold l's values now (not spoiled, not retired).
func (l *loan) dependents() []*loan {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*loan
	for _, d := range l.deps {
		if !d.spoiled.Load() && !d.retired.Load() {
			out = append(out, d)
		}
	}
	return out
}

// freeFor says whether a render apart e may copy l's values: neither l nor a loan whose
// values it holds (depOn), nor one that holds its values (deps), is lent to another render,
// which may be changing them (ModuleCache.mu held). Renders of syncs run one at a time;
// renders apart never borrow a loan with dependents (takeEntry), so that between syncs' renders
// this is all that can run beside another.
func (l *loan) freeFor(e *evaluator, depth int) bool {
	if l.holder != nil && l.holder != e || depth > 4 {
		return false
	}
	for _, d := range l.depOn {
		if !d.freeFor(e, depth+1) {
			return false
		}
	}
	for _, d := range l.dependents() {
		if d.holder != nil && d.holder != e {
			return false
		}
	}
	return true
}

// notSet stands for a name that was not set when the module was computed.
type notSet struct{}

// freeInfo is what a template's source says it reads of the frames it is imported from.
type freeInfo struct {
	names []string
	index map[string]int // names' positions
	reads []freeRead     // what is read of them (reuse_chain.go); nil: each name whole
	sites map[int]int    // the keyed reads' get calls, by position: the read's index
	// nested: the keyed reads' get calls of the templates it imports (reuse_nested.go), by
	// template key, then position: the read's index.
	nested map[string]map[int]int
	// deps: the templates it imports (reuse_nested.go), with the sources walked; src: its
	// source and theirs, what a kept module is kept with (a module serves only while none
	// changed).
	deps []depSrc
	src  string
	ok   bool // false: never kept (it includes a template, has blocks, ...)
}

// maxHashed bounds the values hashed for one import: a module that reads more (a whole
// resource list, say) is computed each time, as comparing it would cost about as much.
const maxHashed = 4096

// LoopReused is how many imports with context inside a template (not at its top) took a kept
// module rather than computing it; of the modules keys, when given, only theirs.
func (c *ModuleCache) LoopReused(keys ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, r := range c.loopReused {
		if len(keys) == 0 || slices.Contains(keys, k) {
			n += r
		}
	}
	return n
}

// LoopKept is how many versions of modules imported inside templates are kept.
func (c *ModuleCache) LoopKept() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, list := range c.loop {
		n += len(list)
	}
	return n
}

// Sweep ends a render (for the loops' iterations kept too: bodyCache.sweep). Of the modules
// imported inside templates since the last Sweep, the versions kept that neither served nor
// were made since then are forgotten (a route deleted, an old version of one). A module not
// imported since (its importer was itself kept whole) keeps its versions. The versions renders
// apart made that no other render took are forgotten too.
func (c *ModuleCache) Sweep() {
	c.bodies.sweep()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.touched) == 0 && c.apartMade == 0 {
		return
	}
	c.apartMade = 0
	// Thousands of entries at 3,000 routes, each swept at every render: the module's name is
	// looked up in touched when it differs from the last entry's (most lists are one module's,
	// and entries of one module follow each other), and a list is set again only when it lost
	// an entry.
	var name string
	var looked, touched bool
	for h, list := range c.loop {
		kept := list[:0]
		for _, le := range list {
			keep := !le.apart && !le.spoiled.Load()
			if keep && le.used < c.gen {
				if n := le.mod.name; !looked || n != name {
					name, looked, touched = n, true, c.touched[n]
				}
				keep = !touched
			}
			if keep {
				kept = append(kept, le)
			}
		}
		switch {
		case len(kept) == 0:
			delete(c.loop, h)
		case len(kept) < len(list):
			clear(list[len(kept):])
			c.loop[h] = kept
		}
	}
	clear(c.touched)
	clear(c.snaps)
	c.gen++
	if len(c.recs) > 4*len(c.loop)+1024 {
		c.recs = nil // the hashes of records gone (old versions of objects); a map cleared keeps its room
	}
	if len(c.frees) > 64 {
		clear(c.frees) // sources of templates since edited
	}
}

// EndCut ends a render cut short (its context ended: a rendering ahead made stale by a
// change) in place of Sweep: what it only held for itself is forgotten (the copies of what
// its imports read, the maps and records found the same or not), and every kept module and
// iteration stays with its marks of use, those it did not reach too. The next render takes on
// from them, and its Sweep sweeps what neither render used. Sweeping here would forget the
// kept parts the render did not reach: the next render would compute them all again (a new
// route's render at 3,000 HTTPRoutes 68 ms rather than 20).
func (c *ModuleCache) EndCut() {
	c.bodies.endCut()
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.snaps)
}

// EndApart ends a render apart (Modules.Apart): the copies of what its imports read are
// forgotten; the versions it made stay until the next Sweep (a render apart after it may take
// them), those it took as they were.
func (c *ModuleCache) EndApart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.snaps)
}

// free returns what tree reads of the frames it is imported from, worked out once per source
// (and per source of the templates it imports, from p).
func (c *ModuleCache) free(p *Program, tree *parse.Tree) freeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fi, ok := c.frees[tree.Src]; ok && p.sameDeps(fi.deps) {
		return fi
	}
	fi := freeNamesIn(tree, p.treeOf)
	if c.frees == nil {
		c.frees = map[string]freeInfo{}
	}
	c.frees[tree.Src] = fi
	return fi
}

// freeNames are the names a template's source reads: its parse.NameExprs and the namespaces
// its `set ns.attr` assign to, but for the names it sets before reading them (freeWalk.stmts).
// A template that names another one, has blocks or uses pongo2's statements is refused (ok
// false).
func freeNames(tree *parse.Tree) freeInfo { return freeNamesIn(tree, nil) }

// freeNamesIn is freeNames, but for a template that imports others with context: what it
// reads is then what it and they read (reuse_nested.go); resolve gives their trees (nil:
// refused, as freeNames).
func freeNamesIn(tree *parse.Tree, resolve func(string) *parse.Tree) freeInfo {
	if len(tree.Refs) > 0 && resolve == nil || tree.Extends || len(tree.Blocks) > 0 {
		return freeInfo{}
	}
	w := freeWalk{seen: map[string]bool{}, bound: map[string]int{}, ok: true, chains: true, resolve: resolve}
	w.stmts(tree.Body, w.walk) // what the module sets at its top before reading it is its own
	if !w.ok || w.seen["self"] || w.seen["super"] {
		return freeInfo{} // the importer's blocks: what they read is not here
	}
	index := make(map[string]int, len(w.names))
	for i, n := range w.names {
		index[n] = i
	}
	reads, sites := w.freeReads()
	return freeInfo{names: w.names, index: index, reads: reads, sites: sites, nested: w.nestedSites,
		deps: w.deps, src: sourcesOf(tree.Src, w.deps), ok: true}
}

type freeWalk struct {
	seen map[string]bool
	uses map[string]*nameUse
	// chains: attribute chains on names are noted as such (freeNames); else (the loop
	// bodies' walks) a chain is walked as any expression.
	chains bool
	// keyed: calls X.get(KEY) on free names' constant chains are noted as keyed reads without
	// chains (the loop bodies' walks: bodyWalk); the names' other uses read them whole.
	keyed bool
	bound map[string]int // names the template binds where the walk is (loops, macros, sets: stmts)
	names []string
	sites []keyedSite // calls X.get(KEY) on free names' chains (freeNames)
	ok    bool
	// resolve gives the trees of the templates imported with context (reuse_nested.go); nil:
	// an import is walked as any statement (the template was refused before, for its Refs).
	resolve func(string) *parse.Tree
	stack   []string // the templates being walked, outermost first (a cycle: refused)
	tmpl    string   // the template walked: "" the top one, else its key
	deps    []depSrc // the templates imported, and theirs
	// nestedSites: freeReads' sites of the imported templates' get calls (freeInfo.nested).
	nestedSites map[string]map[int]int
}

// add notes a use of the free name n whole.
func (w *freeWalk) add(n string) {
	if w.bound[n] == 0 {
		w.note(n)
		if w.chains || w.keyed {
			w.use(n).whole = true
		}
	}
}

// note makes n one of the names read (bound nowhere here).
func (w *freeWalk) note(n string) {
	if !w.seen[n] {
		w.seen[n] = true
		w.names = append(w.names, n)
	}
}

func (w *freeWalk) walk(v reflect.Value) { walkTree(v, w.visit) }

// visit reads one node: a name read, a namespace assigned to; loops, macros and with blocks
// walk what they bind themselves.
func (w *freeWalk) visit(v reflect.Value) bool {
	if v.Kind() == reflect.String {
		return true
	}
	switch x := v.Interface().(type) {
	case *parse.ForStmt:
		w.walkFor(x)
		return false
	case *parse.MacroDef:
		w.walkAll(x.Defaults)
		w.scoped(append([]string{"varargs", "kwargs", "caller"}, x.Params...), x.Body)
		return false
	case *parse.WithStmt:
		w.walkAll(x.Values)
		var names []string
		for _, t := range x.Targets {
			names = append(names, targetNames(t)...)
		}
		w.scoped(names, x.Body)
		return false
	case *parse.AttrExpr:
		if w.chains {
			return w.visitAttr(x)
		}
	case *parse.CallExpr:
		if w.chains {
			return w.visitCall(x)
		}
	case *parse.NameExpr:
		w.add(x.Name)
	case *parse.Target:
		if x.Attr != "" {
			w.add(x.Name)
		}
	case parse.Target:
		if x.Attr != "" {
			w.add(x.Name)
		}
	case *parse.CycleStmt, *parse.FirstofStmt, *parse.IfchangedStmt, *parse.WidthratioStmt, *parse.SpacelessStmt:
		w.ok = false // pongo2's: not worth following
	case *parse.ImportStmt:
		if w.resolve != nil {
			w.imported(x.Key, x.WithContext)
		}
	case *parse.FromImportStmt:
		if w.resolve != nil {
			w.imported(x.Key, x.WithContext)
		}
	case *parse.IncludeStmt, *parse.ExtendsStmt:
		if w.resolve != nil {
			w.ok = false // an include reads the frames as a whole template: not followed
		}
	}
	return true
}

// walkFor walks a for loop: its iterable and else branch where the loop is, its filter where
// its targets are bound, its body where its targets and loop object are.
func (w *freeWalk) walkFor(x *parse.ForStmt) {
	w.walk(reflect.ValueOf(x.Iter))
	// The filter sees the loop's names but not its loop object: `loop` there is the loop
	// around it (lazy_filter.go).
	targets := targetNames(x.Target)
	w.bind(targets, 1)
	w.walkAll(x.Filter)
	w.scoped([]string{"loop", "forloop"}, x.Body)
	w.bind(targets, -1)
	w.walkAll(x.Else)
}

func (w *freeWalk) walkAll(v any) { w.walk(reflect.ValueOf(v)) }

// scoped walks body where names are bound (a macro's parameters, a loop's object, a with
// block's targets): what it reads of those names is not read from the importer, nor what
// body (a frame of its own) sets before reading it (stmts).
func (w *freeWalk) scoped(names []string, body []parse.Stmt) {
	w.bind(names, 1)
	w.stmts(body, w.walk)
	w.bind(names, -1)
}

func (w *freeWalk) bind(names []string, d int) {
	for _, n := range names {
		w.bound[n] += d
	}
}

// targetNames are the names a loop or with target binds (not ns.attr: that reads ns).
func targetNames(t parse.Target) []string {
	if t.Attr != "" {
		return nil
	}
	out := []string{}
	if t.Name != "" {
		out = append(out, t.Name)
	}
	for _, it := range t.Items {
		out = append(out, targetNames(it)...)
	}
	return out
}

// loopReads is the hash of vals, the values of the names an import reads (freeVals); ok is
// false when one cannot be kept and compared (see sameValue), or they are too many. A keyed
// read (reads) is hashed as set or not only: the kept modules with that hash are compared on
// the keys they looked up (keyedRead.same). A dict,
// list or namespace is hashed on its own (containerSum), its hash kept in memo when prev (what
// the import of the same module before read) has it at the same place.
func (c *ModuleCache) loopReads(vals, prev []any, memo map[any]*readMemo, reads []freeRead) (h uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seed == (maphash.Seed{}) {
		c.seed = maphash.MakeSeed()
	}
	if c.recs == nil {
		c.recs = map[*record.Record]uint64{}
	}
	var mh maphash.Hash
	mh.SetSeed(c.seed)
	hs := &hashState{budget: maxHashed, seed: c.seed, recs: c.recs}
	hs.sub.SetSeed(c.seed)
	for i, v := range vals {
		if i < len(reads) && reads[i].keyed {
			if _, ok := v.(notSet); ok {
				mh.WriteByte('u')
			} else {
				mh.WriteByte('K')
			}
			continue
		}
		switch v.(type) {
		case *Dict, *List, *Namespace:
			if i < len(prev) && prev[i] == v {
				if _, ok := memo[v]; !ok {
					memo[v] = nil // read twice in a row: worth watching
				}
			}
			sum, ok := containerSum(v, hs, memo)
			if !ok {
				return 0, false
			}
			mh.WriteByte('c')
			maphash.WriteComparable(&mh, sum)
			continue
		}
		if !hashValue(&mh, v, 0, hs) {
			return 0, false
		}
	}
	return mh.Sum64(), true
}

// readMemo is what the imports of one render found of a dict, list or namespace the
// template made that they read (the HTTPRoute example's Gateways, read by each route's
// part), kept while it does not change: its dicts and lists are the memo's (watch), and a
// change of one spoils it. What it keeps: its hash, and whether it is the same as each kept
// copy of a read it was compared with (those copies never change).
type readMemo struct {
	watch loan
	sum   uint64
	same  map[any]bool
}

// containerSum is the hash of v (a dict, list or namespace): memo's while valid; else worked
// out, and kept in memo when v is a key of memo already (loopReads: read by the import before,
// at the same place), v watched then, when none of its dicts and lists is already another's (a
// kept module's lent to the render, say).
func containerSum(v any, hs *hashState, memo map[any]*readMemo) (uint64, bool) {
	m, seen := memo[v]
	if m != nil && !m.watch.spoiled.Load() {
		return m.sum, true
	}
	h := &hs.sub
	h.Reset()
	if !hashValue(h, v, 0, hs) {
		return 0, false
	}
	sum := h.Sum64()
	if memo == nil {
		return sum, true
	}
	if !seen {
		return sum, true
	}
	m = &readMemo{sum: sum}
	if !watch(v, &m.watch) {
		m = nil
	}
	memo[v] = m
	return sum, true
}

// watch makes the dicts and lists v holds (v too) l's, when none is another's still.
func watch(v any, l *loan) bool {
	held := map[any]bool{}
	containers(v, held)
	for x := range held {
		if o := ownerOf(x); o != nil && !o.spoiled.Load() {
			return false
		}
	}
	for x := range held {
		switch x := x.(type) {
		case *List:
			x.owner = l
		case *Dict:
			x.owner = l
		}
	}
	return true
}

// sameReads is sameValues(kept, vals) for an import's reads, taking from memo what was found
// of a dict, list or namespace read, while it holds.
func sameReads(kept, vals []any, memo map[any]*readMemo, diffs *recordDiffs) bool {
	if len(kept) != len(vals) {
		return false
	}
	for i := range kept {
		if k, ok := kept[i].(*keyedRead); ok {
			if !diffs.keyedSame(k, vals[i]) {
				return false
			}
			continue
		}
		if m := validMemo(memo, vals[i]); m != nil && isContainer(kept[i]) {
			same, ok := m.same[kept[i]]
			if !ok {
				same = sameValue(kept[i], vals[i])
				if m.same == nil {
					m.same = map[any]bool{}
				}
				m.same[kept[i]] = same
			}
			if !same {
				return false
			}
			continue
		}
		if !sameValue(kept[i], vals[i]) {
			return false
		}
	}
	return true
}

func isContainer(v any) bool {
	switch v.(type) {
	case *Dict, *List, *Namespace:
		return true
	}
	return false
}

// validMemo is memo's for v while it holds; nil otherwise.
func validMemo(memo map[any]*readMemo, v any) *readMemo {
	if memo == nil || !isContainer(v) {
		return nil
	}
	if m := memo[v]; m != nil && !m.watch.spoiled.Load() {
		return m
	}
	return nil
}

// unresolved marks a name freeVals has not found yet.
type unresolved struct{}

// freeVals are the values of what fi reads (its reads, else its names) as the frame f shows
// them. The slice is from e's free list (recycleVals).
func (e *evaluator) freeVals(f *frame, fi freeInfo) []any {
	vals := e.takeVals(len(fi.names))
	e.nameVals(f, fi, vals)
	if fi.reads == nil {
		return vals
	}
	out := e.takeVals(len(fi.reads))
	e.readVals(vals, fi, out)
	e.recycleVals(vals)
	return out
}

// takeVals is a slice of n values from e's free list, or a new one.
func (e *evaluator) takeVals(n int) []any {
	if k := len(e.valsFree); k > 0 && cap(e.valsFree[k-1]) >= n {
		var vals []any
		vals, e.valsFree = e.valsFree[k-1][:n], e.valsFree[:k-1]
		return vals
	}
	return make([]any, n)
}

// nameVals sets vals to the values of the names fi reads as the frame f shows them, as
// e.lookup finds each (notSet: not set), in one walk of the frames rather than one per name:
// the per-route part of the HTTPRoute example reads some sixty names (most of them its own,
// not set where it is imported), looked up for each of 3,000 routes.
func (e *evaluator) nameVals(f *frame, fi freeInfo, vals []any) {
	for i := range vals {
		vals[i] = unresolved{}
	}
	left := len(vals)
	for fr := f; fr != nil && left > 0; fr = fr.parent {
		for i := len(fr.names) - 1; i >= 0; i-- {
			if j, ok := fi.index[fr.names[i]]; ok {
				if _, unset := fr.vals[i].(unsetName); unset {
					continue // not set yet: the module, another template, looks further out
				}
				if _, open := vals[j].(unresolved); open {
					vals[j] = fr.vals[i]
					left--
				}
			}
		}
		if fr.ctx == nil {
			continue
		}
		for j, n := range fi.names {
			if _, open := vals[j].(unresolved); open {
				if v, ok := fr.ctx[n]; ok {
					vals[j] = fromData(v)
					left--
				}
			}
		}
	}
	for j, n := range fi.names {
		if _, open := vals[j].(unresolved); open {
			if b := lookupBuiltin(n); b != nil {
				vals[j] = b
			} else {
				vals[j] = notSet{}
			}
		}
	}
}

// recycleVals gives back to e's free list a slice freeVals made, once nothing holds it.
func (e *evaluator) recycleVals(vals []any) {
	if len(e.valsFree) < 8 {
		clear(vals)
		e.valsFree = append(e.valsFree, vals)
	}
}

// loopReuse returns a module kept for key (source src) whose reads were vals, for an import
// from f by the render e: the kept module itself, lent to e until e ends (release), when it
// can be and nobody has it; else a copy. nil when there is none. A module lent to another
// render is not read (that render may be changing it); one that its render changed (spoiled)
// serves no more. A render apart (Modules.Apart) leaves what the next Sweep forgets as it was.
func (c *ModuleCache) loopReuse(key, src string, vals []any, h uint64, f *frame, e *evaluator) (*module, *loopEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(key, e)
	for _, le := range c.loop[h] {
		if !le.serves(key, src, vals, e) {
			continue
		}
		return c.takeEntry(le, key, f, e), le
	}
	return nil, nil
}

// touch notes that key was imported in a loop by e since the last Sweep (c.mu held).
func (c *ModuleCache) touch(key string, e *evaluator) {
	if !e.shared.Apart {
		if c.touched == nil {
			c.touched = map[string]bool{}
		}
		c.touched[key] = true
	}
}

// serves says whether le is a module kept for key (source src) that read vals and that e
// may take (c.mu held).
func (le *loopEntry) serves(key, src string, vals []any, e *evaluator) bool {
	ok := le.mod.name == key && le.src == src && !le.spoiled.Load() && (le.holder == nil || le.holder == e) &&
		(!e.shared.Apart || le.freeFor(e, 0)) && sameReads(le.vals, vals, e.memo, &e.shared.Across.bodies.diffs)
	if ok && !e.shared.Apart {
		adoptData(le.vals, vals)
	}
	return ok
}

// adoptData makes the kept reads hold the data of vals (found the same: serves) where they
// hold other objects of the same data: a record or a map of the context read, or one in a
// list or tuple read (a copy of the kept one then: a copy may be another entry's too, and
// another render may be comparing it). The next renders then find them the same in one step,
// as bodyCache.same does: after the status writer's wave (every HTTPRoute a new object, its
// spec the same), each block of the HTTPRoute example compared its 64 routes' specs in depth
// at every sync, until it was computed again. (c.mu held.)
func adoptData(kept, vals []any) {
	for i, v := range vals {
		switch k := kept[i].(type) {
		case *List:
			if w, ok := v.(*List); ok {
				if items, changed := adoptItems(k.items, w.items); changed {
					kept[i] = &List{items: items}
				}
			}
		case Tuple:
			if w, ok := v.(Tuple); ok {
				if items, changed := adoptItems(k, w); changed {
					kept[i] = Tuple(items)
				}
			}
		default:
			if otherData(k, v) {
				kept[i] = v
			}
		}
	}
}

// adoptItems is adoptData for the items of a list kept and of the one read: a copy of kept
// with vals' data, when some differ (changed).
func adoptItems(kept, vals []any) (items []any, changed bool) {
	if len(kept) != len(vals) {
		return nil, false
	}
	for j, v := range vals {
		if !otherData(kept[j], v) {
			continue
		}
		if !changed {
			items, changed = slices.Clone(kept), true
		}
		items[j] = v
	}
	return items, changed
}

// otherData says whether a and b are records or maps of the context (never changed), of one
// kind, and not the same object.
func otherData(a, b any) bool {
	switch x := a.(type) {
	case *record.Record:
		y, ok := b.(*record.Record)
		return ok && x != y
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && mapID(x) != mapID(y)
	}
	return false
}

// takeEntry hands le's module to the import from f by e: lent, or a copy; nil when it cannot be
// copied (c.mu held).
func (c *ModuleCache) takeEntry(le *loopEntry, key string, f *frame, e *evaluator) *module {
	var m *module
	// Not lent to a render apart when a kept module holds its values (it could change them
	// while the next sync's render reads them): a copy.
	if le.lendable && le.holder == nil && !(e.shared.Apart && len(le.dependents()) > 0) {
		le.holder, m = e, le.mod
		e.lent = append(e.lent, le)
	} else {
		var ok bool
		if m, ok = copyModule(le.mod, f); !ok {
			return nil
		}
	}
	if !e.shared.Apart {
		le.used, le.apart = c.gen, false
		le.useParts(c.gen, 0)
	}
	if c.loopReused == nil {
		c.loopReused = map[string]int{}
	}
	c.loopReused[key]++
	return m
}

// loopSnapshot copies the values an import reads, before the module runs: what it is kept
// with (the importing template may change them afterwards), and what they must still be once
// it ran. ok is false when one cannot be copied. Keyed reads (reads) are left nil: what their
// lookups find is copied as the module looks (keyRecorder).
// A copy equal to one taken since the last Sweep of the same dict, list or namespace is that
// one (the copies are never changed): the Gateways every route's part reads are copied once,
// not once per route.
func (mc *ModuleCache) loopSnapshot(vals []any, reads []freeRead) ([]any, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	c := copier{seen: map[any]any{}}
	out := make([]any, len(vals))
	for i, v := range vals {
		if i < len(reads) && reads[i].keyed {
			if _, ok := v.(notSet); ok {
				out[i] = v
			}
			continue
		}
		switch v.(type) {
		case notSet, missRead: // missRead: of data, which never changes
			out[i] = v
			continue
		case *Dict, *List, *Namespace:
			if s := mc.snapOf(v); s != nil {
				out[i] = s
				continue
			}
		}
		cv, ok := c.copy(v)
		if !ok {
			return nil, false
		}
		switch v.(type) {
		case *Dict, *List, *Namespace:
			if mc.snaps == nil {
				mc.snaps = map[any][]any{}
			}
			mc.snaps[v] = append(mc.snaps[v], cv)
		}
		out[i] = cv
	}
	return out, true
}

// snapOf is a copy taken since the last Sweep of v that is still equal to it; nil if none.
func (mc *ModuleCache) snapOf(v any) any {
	for _, s := range mc.snaps[v] {
		if sameValue(s, v) {
			return s
		}
	}
	return nil
}

// loopKeep keeps m, computed for key (source src) by the render e from the values vals (snap:
// their copies taken before it ran), when nothing it did shows outside its values: m itself,
// lent to e, when it can be (ownModule), else a copy. A render apart's is kept until the next
// Sweep only, and is a copy.
func (c *ModuleCache) loopKeep(key string, lr *loopRead, m *module, e *evaluator) *loopEntry {
	src, vals, snap, h, apart := lr.src, lr.vals, lr.snap, lr.hash, e.shared.Apart
	if !sameReads(snap, vals, nil, nil) {
		return nil // it changed what it was given
	}
	outer := map[any]bool{}
	for i, v := range vals {
		if k, ok := snap[i].(*keyedRead); ok {
			for _, w := range k.lookups(v) {
				containers(w, outer)
			}
			continue
		}
		containers(v, outer)
	}
	// What m holds, walked once: for the check here and for ownModule's (a block of the
	// HTTPRoute example holds its 64 routes' parts).
	var held map[any]bool
	if len(outer) > 0 || !apart {
		held = moduleContainers(m)
	}
	for p := range outer {
		if held[p] {
			return nil // its values hold one it was given
		}
	}
	// Its dicts and lists are its: a change of one, once lent, spoils it (one never lent is
	// copied for each import: nobody changes it). m itself when it can be lent: the values the
	// importer takes from it (the Ingress example's routes merge its parts' dicts) are then the
	// ones kept, which a module kept for the next render holds as they are (adopter.lean), not
	// a copy of them beside the copy kept here. Not by a render apart: it runs beside the
	// syncs' renders, which could not take what it kept while it has it (a copy, then).
	le := &loopEntry{src: src, vals: snap, parts: lr.parts}
	own := !apart && ownModule(m, held, &le.loan)
	if own {
		le.mod, le.lendable = detachModule(m), true
	} else {
		mod, ok, _ := copyModuleOwned(m, nil, &le.loan)
		if !ok {
			return nil
		}
		le.mod, le.lendable = mod, lendable(mod)
	}
	le.whole = le.lendable
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop == nil {
		c.loop = map[uint64][]*loopEntry{}
	}
	if own {
		le.holder = e // the render has m: lent to it until it ends, as one taken (takeEntry)
		le.made = true
		le.onSpoil = func() { c.renewEntry(h, le) }
		e.lent = append(e.lent, le)
	}
	le.used, le.apart = c.gen, apart
	c.loop[h] = append(c.loop[h], le)
	if apart {
		c.apartMade++
	}
	return le
}

// detachModule is m (a module imported in a loop, kept as it is: loopKeep) with a top level of
// its own in front of no frame: what is kept holds nothing of the importer's frames. Its
// values are m's.
func detachModule(m *module) *module {
	d := *m
	if m.frame != nil {
		d.frame = &frame{names: slices.Clone(m.frame.names), vals: slices.Clone(m.frame.vals), ctx: m.frame.ctx}
		keep(d.frame)
	}
	return &d
}

// renewEntry is the copy on write of le, a module kept as the render it is lent to made it
// (loopKeep): that render is about to change one of its values, so a copy of it as it still
// is takes its place for the next renders (the copy loopKeep would otherwise have kept). One
// taken by a later render and changed is not copied: it serves no more.
func (c *ModuleCache) renewEntry(h uint64, le *loopEntry) {
	c.mu.Lock()
	made := le.made
	c.mu.Unlock()
	if !made {
		return
	}
	le2 := &loopEntry{src: le.src, vals: le.vals, lendable: true, parts: le.parts}
	mod, ok, _ := copyModuleOwned(le.mod, nil, &le2.loan) // only its render changes it: as it still is
	if !ok {
		return
	}
	le2.mod, le2.whole = mod, true
	c.mu.Lock()
	defer c.mu.Unlock()
	le2.used, le2.apart = le.used, le.apart
	if i := slices.Index(c.loop[h], le); i >= 0 {
		c.loop[h][i] = le2
	}
}

// release ends the loans of the modules lent to a render (loopReuse).
func (c *ModuleCache) release(lent []*loopEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, le := range lent {
		le.holder, le.made = nil, false
	}
}

// lendable says whether a kept module (a copy: its dicts, lists and namespaces are its own)
// may be handed out itself: what a template can change in it goes through a dict's or a
// list's methods only (which spoil it, once its own), so it holds no macro (whose frame
// would be the importer's) and no tuple (which retaint changes in place).
func lendable(m *module) bool { return lendableHolding(m, moduleContainers(m)) }

// lendableHolding is lendable(m), held being m's containers (moduleContainers).
func lendableHolding(m *module, held map[any]bool) bool {
	for v := range held {
		if _, ok := v.(*Macro); ok {
			return false
		}
	}
	return !holdsTuple(m.vars, 0) && (m.frame == nil || !holdsTuple(m.frame.vals, 0))
}

// moduleContainers are the dicts, lists, namespaces and macros m holds (containers): in its
// top level's values and its exported names.
func moduleContainers(m *module) map[any]bool {
	seen := map[any]bool{}
	if m.frame != nil {
		for _, v := range m.frame.vals {
			containers(v, seen)
		}
	}
	containers(m.vars, seen)
	return seen
}

// holdsTuple says whether v holds a tuple (v is a kept module's copy: no cycles).
func holdsTuple(v any, depth int) bool {
	if depth > maxCallDepth*4 {
		return true
	}
	switch x := v.(type) {
	case Tuple:
		return true
	case []any:
		for _, e := range x {
			if holdsTuple(e, depth+1) {
				return true
			}
		}
	case *List:
		return holdsTuple(x.items, depth+1)
	case *Dict:
		return holdsTuple(x.vals, depth+1)
	case *Namespace:
		return holdsTuple(x.attrs, depth+1)
	}
	return false
}

// containers adds to seen the dicts, lists and namespaces v holds (v too), and macros.
func containers(v any, seen map[any]bool) {
	switch x := v.(type) {
	case *List, *Dict, *Namespace:
		if seen[x] {
			return
		}
		seen[x] = true
	}
	switch x := v.(type) {
	case *List:
		for _, e := range x.items {
			containers(e, seen)
		}
	case *Dict:
		for _, e := range x.vals {
			containers(e, seen)
		}
	case *Namespace:
		containers(x.attrs, seen)
	case Tuple:
		for _, e := range x {
			containers(e, seen)
		}
	case *Macro:
		seen[x] = true
	}
}

// sameValues says whether two lists of values are the same, item by item (sameValue).
func sameValues(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// sameValue says whether a and b are the same value to a template that only reads them: the
// same data (sameData), or the template's own dicts, lists, tuples and namespaces with the
// same contents, the same built-in function, a name not set in both. Anything else (a macro,
// a loop object, a module) is never the same.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case notSet:
		_, ok := b.(notSet)
		return ok
	case missRead:
		y, ok := b.(missRead)
		return ok && x.name == y.name && sameData(x.obj, y.obj)
	case Markup:
		y, ok := b.(Markup)
		return ok && x == y
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case *builtin:
		return a == b
	case *List:
		y, ok := b.(*List)
		return ok && sameValues(x.items, y.items)
	case Tuple:
		y, ok := b.(Tuple)
		return ok && sameValues(x, y)
	case *Namespace:
		y, ok := b.(*Namespace)
		return ok && sameValue(x.attrs, y.attrs)
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for i := range x.keys {
			if !sameValue(x.keys[i], y.keys[i]) || !sameValue(x.vals[i], y.vals[i]) {
				return false
			}
		}
		return true
	case float64:
		// NaN is not equal to itself; as data it is the same value.
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	return sameData(a, b)
}

// hashValue writes v to h, for the values sameValue compares: equal values hash alike
// (records by their contents, not their identity). False when v is of a kind sameValue never
// finds the same, or there are more than budget values.
func hashValue(h *maphash.Hash, v any, depth int, hs *hashState) bool {
	hs.budget--
	if hs.budget < 0 {
		return false
	}
	if hashScalar(h, v) {
		return true
	}
	switch x := v.(type) {
	case *record.Record:
		sum, ok := hs.record(x, depth)
		if !ok {
			return false
		}
		h.WriteByte('r')
		maphash.WriteComparable(h, sum)
	case []any:
		h.WriteByte('L')
		maphash.WriteComparable(h, len(x))
		for _, e := range x {
			if !hashValue(h, e, depth+1, hs) {
				return false
			}
		}
	case *List:
		return hashList(h, 'l', x.items, depth, hs)
	case Tuple:
		return hashList(h, 'p', x, depth, hs)
	case missRead:
		h.WriteByte('x')
		h.WriteString(x.name)
		return hashValue(h, x.obj, depth+1, hs)
	case *Namespace:
		h.WriteByte('N')
		return hashValue(h, x.attrs, depth+1, hs)
	case *Dict:
		h.WriteByte('d')
		maphash.WriteComparable(h, len(x.keys))
		for i := range x.keys {
			if !hashValue(h, x.keys[i], depth+1, hs) || !hashValue(h, x.vals[i], depth+1, hs) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// hashState is what one import's hashing goes by: the values it may still hash, and the
// hashes of records (which never change) by identity, kept from one import to the next.
type hashState struct {
	budget int
	seed   maphash.Seed
	recs   map[*record.Record]uint64
	sub    maphash.Hash // containerSum's, seeded
}

// record is the hash of a record's contents. A record's values are counted against a budget of
// their own, not the import's (where the record counts one): its hash is kept by identity, so
// it is computed once, and a module reading a block of records (the Ingress example's parts
// of 64 Ingresses) is kept although the block holds more than maxHashed values.
func (hs *hashState) record(r *record.Record, depth int) (uint64, bool) {
	if sum, ok := hs.recs[r]; ok {
		return sum, true
	}
	outer := hs.budget
	hs.budget = maxHashed
	defer func() { hs.budget = outer }()
	var h maphash.Hash
	h.SetSeed(hs.seed)
	maphash.WriteComparable(&h, r.Len())
	for i := range r.Len() {
		h.WriteString(r.Key(i))
		if !hashValue(&h, r.Value(i), depth+1, hs) {
			return 0, false
		}
	}
	sum := h.Sum64()
	hs.recs[r] = sum
	return sum, true
}

// hashScalar writes v to h when it is a scalar (or a value hashed by its size only); false
// for any other.
func hashScalar(h *maphash.Hash, v any) bool {
	switch x := v.(type) {
	case nil:
		h.WriteByte('n')
	case notSet:
		h.WriteByte('u')
	case bool:
		h.WriteByte('b')
		if x {
			h.WriteByte(1)
		}
	case int64:
		h.WriteByte('i')
		maphash.WriteComparable(h, x)
	case int:
		h.WriteByte('i')
		maphash.WriteComparable(h, int64(x))
	case float64:
		h.WriteByte('f') // NaN: sameValue finds NaNs the same; the bits may differ
	case string:
		h.WriteByte('s')
		h.WriteString(x)
	case Markup:
		h.WriteByte('m')
		h.WriteString(string(x))
	case *tainted:
		h.WriteByte('t')
		h.WriteString(x.s)
	case *big.Int:
		h.WriteByte('B')
	case *builtin:
		h.WriteByte('F')
		h.WriteString(x.name)
	case map[string]any:
		h.WriteByte('M') // in no order: its size only
		maphash.WriteComparable(h, len(x))
	case map[string]string:
		h.WriteByte('S')
		maphash.WriteComparable(h, len(x))
	case []string:
		h.WriteByte('T')
		for _, e := range x {
			h.WriteString(e)
		}
	case []map[string]any:
		h.WriteByte('D')
		maphash.WriteComparable(h, len(x))
	default:
		return false
	}
	return true
}

func hashList(h *maphash.Hash, tag byte, items []any, depth int, hs *hashState) bool {
	h.WriteByte(tag)
	maphash.WriteComparable(h, len(items))
	for _, e := range items {
		if !hashValue(h, e, depth+1, hs) {
			return false
		}
	}
	return true
}

// loopRead is what an import inside a template read, to keep the module it computes.
type loopRead struct {
	vals, snap []any
	hash       uint64
	run        *importRun
	keys       *keyRecorder // its keyed reads' lookups, recorded as the module runs (nil: none)
	parts      []*loopEntry // the modules its computation imported in loops, kept (reuse_nested.go)
	src        string       // its source, and those of the templates it imports (freeInfo.src)
}

// loopImport returns the module kept for an import of t (key) from f, if one read the same;
// else, when the module may be kept once computed, what it reads (nil: it may not).
func (e *evaluator) loopImport(key string, t *Template, f *frame) (*module, *loopRead) {
	c := e.shared.Across
	fi := c.free(e.prog, t.tree)
	if !fi.ok {
		return nil, nil
	}
	vals := e.freeVals(f, fi)
	if e.memo == nil {
		e.memo, e.prevReads = map[any]*readMemo{}, map[string][]any{}
	}
	run := e.importRun(key)
	if m, le := c.hinted(key, fi.src, run, vals, f, e); m != nil {
		e.keys.adopt(key, fi, vals, le)
		e.notePart(le)
		run.list = append(run.list, le)
		e.recycleVals(vals)
		return m, nil
	}
	prev := e.prevReads[key]
	h, ok := c.loopReads(vals, prev, e.memo, fi.reads)
	if len(prev) != len(vals) {
		prev = make([]any, len(vals))
		e.prevReads[key] = prev
	}
	for i, v := range vals {
		if isContainer(v) && (fi.reads == nil || !fi.reads[i].keyed) {
			prev[i] = v
		} else {
			prev[i] = nil
		}
	}
	if !ok {
		run.list = append(run.list, nil)
		e.recycleVals(vals)
		return nil, nil
	}
	if m, le := c.loopReuse(key, fi.src, vals, h, f, e); m != nil {
		e.keys.adopt(key, fi, vals, le)
		e.notePart(le)
		run.realign(c, key, le)
		run.list = append(run.list, le)
		e.recycleVals(vals)
		return m, nil
	}
	snap, ok := c.loopSnapshot(vals, fi.reads)
	if !ok {
		run.list = append(run.list, nil)
		e.recycleVals(vals)
		return nil, nil
	}
	return nil, &loopRead{vals: vals, snap: snap, hash: h, run: run, src: fi.src, keys: newKeyRecorder(c, fi.reads, fi.sites, fi.nested, vals, snap)}
}
