package jinja

import (
	"hash/maphash"
	"math"
	"math/big"
	"reflect"
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Imports with context that are not at a template's top (in a loop's body, say: one per
// route) are kept too, several per module, from one render to the next: such a module's values
// are a function of its source and of the values of the names it reads, which are those its
// source names (parse.NameExpr, and the namespace of a `set ns.attr`, but for the names its own
// loops, macros and with blocks bind): it reads nothing else of the importing frames or the
// context. When each of those names has the same value as when a kept module was computed (the
// same data, compared as sameValue does; found by a hash of them), a copy of that module
// serves. The per-route part of the HTTPRoute example is such a module: after a route's
// change, only that route's is computed again. Not in a template set that tests which object
// a value is (sameas), as ModuleCache.
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
	vals []any   // the values of the names read, in freeNames order (absent: notSet)
	mod  *module // a copy nobody changes: each use copies it
	used uint64  // the last generation (Sweep) it served or was made in
	// apart: made by a render apart (Modules.Apart) and used by no other render since: the
	// next Sweep forgets it.
	apart bool
}

// notSet stands for a name that was not set when the module was computed.
type notSet struct{}

// freeInfo is what a template's source says it reads of the frames it is imported from.
type freeInfo struct {
	names []string
	ok    bool // false: never kept (it names another template, has blocks, ...)
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

// Sweep ends a render: of the modules imported inside templates since the last Sweep, the
// versions kept that neither served nor were made since then are forgotten (a route deleted,
// an old version of one). A module not imported since (its importer was itself kept whole)
// keeps its versions. The versions renders apart made that no other render took are
// forgotten too.
func (c *ModuleCache) Sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.touched) == 0 && c.apartMade == 0 {
		return
	}
	c.apartMade = 0
	for h, list := range c.loop {
		kept := list[:0]
		for _, le := range list {
			if !le.apart && (le.used >= c.gen || !c.touched[le.mod.name]) {
				kept = append(kept, le)
			}
		}
		if len(kept) == 0 {
			delete(c.loop, h)
		} else {
			clear(list[len(kept):])
			c.loop[h] = kept
		}
	}
	clear(c.touched)
	clear(c.snaps)
	c.gen++
	if len(c.recs) > 4*len(c.loop)+1024 {
		clear(c.recs) // the hashes of records gone (old versions of objects)
	}
	if len(c.frees) > 64 {
		clear(c.frees) // sources of templates since edited
	}
}

// EndApart ends a render apart (Modules.Apart): the copies of what its imports read are
// forgotten; the versions it made stay until the next Sweep (a render apart after it may take
// them), those it took as they were.
func (c *ModuleCache) EndApart() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.snaps)
}

// free returns what tree reads of the frames it is imported from, worked out once per source.
func (c *ModuleCache) free(tree *parse.Tree) freeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fi, ok := c.frees[tree.Src]; ok {
		return fi
	}
	fi := freeNames(tree)
	if c.frees == nil {
		c.frees = map[string]freeInfo{}
	}
	c.frees[tree.Src] = fi
	return fi
}

// freeNames are the names a template's source reads: its parse.NameExprs and the namespaces
// its `set ns.attr` assign to. A template that names another one, has blocks or uses pongo2's
// statements is refused (ok false).
func freeNames(tree *parse.Tree) freeInfo {
	if len(tree.Refs) > 0 || tree.Extends || len(tree.Blocks) > 0 {
		return freeInfo{}
	}
	w := freeWalk{seen: map[string]bool{}, bound: map[string]int{}, ok: true}
	w.walk(reflect.ValueOf(tree.Body))
	if !w.ok || w.seen["self"] || w.seen["super"] {
		return freeInfo{} // the importer's blocks: what they read is not here
	}
	return freeInfo{names: w.names, ok: true}
}

type freeWalk struct {
	seen  map[string]bool
	bound map[string]int // names a loop, macro or with block of the template binds where the walk is
	names []string
	ok    bool
}

func (w *freeWalk) add(n string) {
	if w.bound[n] == 0 && !w.seen[n] {
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
	}
	return true
}

// walkFor walks a for loop: its iterable and else branch where the loop is, its filter and
// body where its targets and loop are bound.
func (w *freeWalk) walkFor(x *parse.ForStmt) {
	w.walk(reflect.ValueOf(x.Iter))
	names := append([]string{"loop", "forloop"}, targetNames(x.Target)...)
	w.scoped(names, x.Filter, x.Body)
	w.walkAll(x.Else)
}

func (w *freeWalk) walkAll(v any) { w.walk(reflect.ValueOf(v)) }

// scoped walks parts where names are bound (a macro's parameters, a loop's or with block's
// targets): what they read of those names is not read from the importer.
func (w *freeWalk) scoped(names []string, parts ...any) {
	w.bind(names, 1)
	for _, p := range parts {
		w.walkAll(p)
	}
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

// loopReads are the values of the names fi reads, as the frame f shows them, and their hash;
// ok is false when one cannot be kept and compared (see sameValue), or they are too many.
func (c *ModuleCache) loopReads(fi freeInfo, look func(string) (any, bool)) (vals []any, h uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seed == (maphash.Seed{}) {
		c.seed = maphash.MakeSeed()
		c.recs = map[*record.Record]uint64{}
	}
	var mh maphash.Hash
	mh.SetSeed(c.seed)
	hs := &hashState{budget: maxHashed, seed: c.seed, recs: c.recs}
	vals = make([]any, len(fi.names))
	for i, n := range fi.names {
		v, present := look(n)
		if !present {
			v = notSet{}
		}
		if !hashValue(&mh, v, 0, hs) {
			return nil, 0, false
		}
		vals[i] = v
	}
	return vals, mh.Sum64(), true
}

// loopReuse returns a copy of a module kept for key (source src) whose reads were vals, for
// an import from f; nil when there is none. apart: for a render apart, which leaves what the
// next Sweep forgets as it was.
func (c *ModuleCache) loopReuse(key, src string, vals []any, h uint64, f *frame, apart bool) *module {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !apart {
		if c.touched == nil {
			c.touched = map[string]bool{}
		}
		c.touched[key] = true
	}
	for _, le := range c.loop[h] {
		if le.mod.name != key || le.src != src || !sameValues(le.vals, vals) {
			continue
		}
		m, ok := copyModule(le.mod, f)
		if !ok {
			return nil
		}
		if !apart {
			le.used, le.apart = c.gen, false
		}
		if c.loopReused == nil {
			c.loopReused = map[string]int{}
		}
		c.loopReused[key]++
		return m
	}
	return nil
}

// loopSnapshot copies the values an import reads, before the module runs: what it is kept
// with (the importing template may change them afterwards), and what they must still be once
// it ran. ok is false when one cannot be copied.
// A copy equal to one taken since the last Sweep of the same dict, list or namespace is that
// one (the copies are never changed): the Gateways every route's part reads are copied once,
// not once per route.
func (mc *ModuleCache) loopSnapshot(vals []any) ([]any, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	c := copier{seen: map[any]any{}}
	out := make([]any, len(vals))
	for i, v := range vals {
		switch v.(type) {
		case notSet:
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

// loopKeep keeps a copy of m, computed for key (source src) from the values vals (snap:
// their copies taken before it ran), when nothing it did shows outside its values; apart: by a
// render apart, until the next Sweep only.
func (c *ModuleCache) loopKeep(key, src string, vals, snap []any, h uint64, m *module, apart bool) {
	if !sameValues(snap, vals) {
		return // it changed what it was given
	}
	outer := map[any]bool{}
	for _, v := range vals {
		containers(v, outer)
	}
	if len(outer) > 0 {
		held := map[any]bool{}
		if m.frame != nil {
			for _, v := range m.frame.vals {
				containers(v, held)
			}
		}
		containers(m.vars, held)
		for p := range held {
			if outer[p] {
				return // its values hold one it was given
			}
		}
	}
	mod, ok := copyModule(m, nil)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop == nil {
		c.loop = map[uint64][]*loopEntry{}
	}
	c.loop[h] = append(c.loop[h], &loopEntry{src: src, vals: snap, mod: mod, used: c.gen, apart: apart})
	if apart {
		c.apartMade++
	}
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
}

// record is the hash of a record's contents.
func (hs *hashState) record(r *record.Record, depth int) (uint64, bool) {
	if sum, ok := hs.recs[r]; ok {
		return sum, true
	}
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
}

// loopImport returns the module kept for an import of t (key) from f, if one read the same;
// else, when the module may be kept once computed, what it reads (nil: it may not).
func (e *evaluator) loopImport(key string, t *Template, f *frame) (*module, *loopRead) {
	c := e.shared.Across
	fi := c.free(t.tree)
	if !fi.ok {
		return nil, nil
	}
	vals, h, ok := c.loopReads(fi, func(n string) (any, bool) { return e.lookup(f, n) })
	if !ok {
		return nil, nil
	}
	if m := c.loopReuse(key, t.tree.Src, vals, h, f, e.shared.Apart); m != nil {
		return m, nil
	}
	snap, ok := c.loopSnapshot(vals)
	if !ok {
		return nil, nil
	}
	return nil, &loopRead{vals: vals, snap: snap, hash: h}
}
