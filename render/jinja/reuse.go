package jinja

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// ModuleCache keeps, from one render to the next, the modules that Modules shares (imported
// with context at the top of a template, before anything is set there): such a module sees
// nothing but the render context, so when none of the context's values it can read differs
// from the last render's, it would compute the same values, macros and output, and a copy of
// the last one serves. What it can read is found in its source and in the sources of the
// templates it names (include, import): every name they use (a name never looked up is never
// read), and of "resources", when it is only ever used as resources.NAME, resources["NAME"]
// or resources.get("NAME"), only those resources. Values are compared as data: equal scalars,
// the same record (the snapshot's records never change; a source keeps an unchanged object's
// record from one sync to the next), or equal contents. No module of a template set that
// tests which object a value is (sameas) is kept: the lists and dicts a snapshot makes anew
// at each sync are equal to the last ones, not the same. Modules imported with context
// elsewhere (in a loop) are kept too, per value of what they read: reuse_loop.go.
//
// One per Renderer; safe for concurrent use.
type ModuleCache struct {
	mu     sync.Mutex
	m      map[string]*keptModule
	reused int

	// Imports with context inside a template (reuse_loop.go).
	loop       map[uint64][]*loopEntry // by the hash of what they read
	frees      map[string]freeInfo     // by source
	computed   map[string]int          // imports in loops computed, by key (LoopComputed)
	gen        uint64                  // Sweeps so far
	touched    map[string]bool         // the modules imported that way since the last Sweep
	seed       maphash.Seed
	recs       map[*record.Record]uint64 // the hashes of records' contents (hashState)
	snaps      map[any][]any             // copies of what imports read, by the value copied, until Sweep
	loopReused map[string]int            // by module
	hints      map[string][]*loopEntry   // by module: what the last render's imports took or made, in order (reuse_hint.go)
	hintedN    int                       // imports that took the module at the same place
	apartMade  int                       // versions made by renders apart since the last Sweep

	bodies bodyCache // loops' iterations (reuse_body.go)
}

// moduleFacts is what ModuleCache reads of a template of its program: its sources and those of
// the templates it names (sources), and the context names they read (contextNames; namesOK
// false: not known). Worked out once per compiled template, when first asked (a walk of the
// HTTPRoute example's model and its templates, and their sources joined, cost 1.2 ms and
// 0.4 MB a build at 3,000 routes when made per import).
type moduleFacts struct {
	once        sync.Once
	src         string
	names, subs []string
	namesOK     bool
}

// facts are t's moduleFacts in p, its program (a program's templates never change).
func (p *Program) facts(t *Template) *moduleFacts {
	f := &t.facts
	f.once.Do(func() {
		f.src = p.sources(t.tree)
		f.names, f.subs, f.namesOK = contextNames(p, t.tree)
	})
	return f
}

// Reused is how many imports took a kept module rather than computing it.
func (c *ModuleCache) Reused() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reused
}

type keptModule struct {
	src   string
	reads []ctxRead
	mod   *module // the copy kept: lent to one render at a time, or copied (take)
	// view: mod's dicts, lists and namespaces hold no macro and no tuple, so that an import
	// may share them (viewModule): its dicts and lists are its (loan), a change of one spoils
	// it, and no import's memo of what it read takes them (readMemo)
	view bool
	next *keptModule // spoiled: the copy that took its place (renew)
	loan             // holder: the render it is lent to (view); nil: none
}

// ctxRead is a value of the context a module can read, as it was: context[name], or
// context["resources"][sub].
type ctxRead struct {
	name, sub string
	val       any
	present   bool
}

// reuse returns the module kept for key for an import from f by the render e (take), if its
// source is src and nothing it can read in vars differs, and the kept module; nil otherwise.
// One that no longer serves is forgotten at once (not by a render apart, nor while another
// render has it), so that it is not held beside the one about to be computed.
func (c *ModuleCache) reuse(p *Program, key string, t *Template, vars map[string]any, f *frame, e *evaluator) (m *module, kept *keptModule) {
	src := p.facts(t).src
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.m[key]
	if !ok {
		return nil, nil
	}
	forget := func() {
		if k.holder == nil && (e.shared == nil || !e.shared.Apart) {
			delete(c.m, key)
			k.retire()
		}
	}
	if k.src != src || k.spoiled.Load() {
		forget()
		return nil, nil
	}
	for _, r := range k.reads {
		v, present := readContext(vars, r.name, r.sub)
		if present != r.present || !sameData(v, r.val) {
			forget()
			return nil, nil
		}
	}
	if m, k = c.takeLocked(k, e, f); m == nil {
		return nil, nil
	}
	c.reused++
	return m, k
}

// take hands the module k keeps (or the copy that took its place: renew) to an import from f
// by the render e: lent to e until it ends (releaseKept), as a view sharing its values, when it
// can be (k.view; not to a render apart, which leaves what is kept as it was); else a copy.
// nil when a template changed it, or when another render has it (which may be changing it).
// kept is the one taken.
func (c *ModuleCache) take(k *keptModule, e *evaluator, f *frame) (m *module, kept *keptModule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeLocked(k, e, f)
}

func (c *ModuleCache) takeLocked(k *keptModule, e *evaluator, f *frame) (*module, *keptModule) {
	for k.spoiled.Load() && k.next != nil {
		k = k.next
	}
	apart := e.shared != nil && e.shared.Apart
	if k.spoiled.Load() || k.retired.Load() || (k.holder != nil && k.holder != e) || apart && !k.freeFor(e, 0) {
		return nil, nil
	}
	if k.view && !apart {
		if k.holder == nil {
			k.holder = e
			e.keptLent = append(e.keptLent, k)
		}
		return viewModule(k.mod, f), k
	}
	m, _ := copyModule(k.mod, f)
	return m, k
}

// releaseKept ends the loans of the kept modules lent to the render e (take).
func (c *ModuleCache) releaseKept(e *evaluator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range e.keptLent {
		if k.holder == e {
			k.holder = nil
		}
	}
	e.keptLent = nil
}

// keep keeps m, computed for key from tree with the context vars by the render e, with the
// values it can read, and returns what it keeps; nil when it keeps none. It keeps m itself
// when it can (adoptModule: the render then imports a view of it, as the next do), else a
// copy. One that can be lent is lent to e already: the other files' imports of this render
// take it.
func (c *ModuleCache) keep(p *Program, key string, t *Template, vars map[string]any, m *module, e *evaluator) *keptModule {
	ti := p.facts(t)
	names, subs := ti.names, ti.subs
	if !ti.namesOK {
		return nil
	}
	km := &keptModule{src: ti.src}
	mod, view, ok := m, true, true
	if on, adopted := adoptModule(m, &km.loan); adopted {
		km.depOn = on
	} else if mod, ok, view = copyModuleOwned(m, nil, &km.loan); !ok {
		return nil
	}
	km.whole = view
	var reads []ctxRead
	for _, n := range names {
		if n == "resources" && subs != nil {
			if isMapping(vars[n]) {
				for _, s := range subs {
					v, present := readContext(vars, n, s)
					reads = append(reads, ctxRead{name: n, sub: s, val: v, present: present})
				}
				continue
			}
		}
		v, present := vars[n]
		reads = append(reads, ctxRead{name: n, val: v, present: present})
	}
	km.reads, km.mod, km.view = reads, mod, view
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*keptModule{}
	}
	if km.view {
		km.holder = e
		e.keptLent = append(e.keptLent, km)
		km.onSpoil = func() { c.renew(key, km) }
	}
	if old := c.m[key]; old != nil {
		old.retire()
	}
	c.m[key] = km
	return km
}

// renew is k's copy on write: a template of the render k is lent to is about to change one of
// its dicts or lists (k spoiled: that render has it to itself from then on), so a copy of it
// as it still is takes its place for the next imports and renders.
func (c *ModuleCache) renew(key string, k *keptModule) {
	k2 := &keptModule{src: k.src, reads: k.reads, view: true}
	mod, ok, _ := copyModuleOwned(k.mod, nil, &k2.loan)
	if !ok {
		return
	}
	k2.mod, k2.whole = mod, true
	k2.onSpoil = func() { c.renew(key, k2) }
	c.mu.Lock()
	defer c.mu.Unlock()
	k.next = k2
	if c.m[key] == k {
		c.m[key] = k2
	}
}

// testsIdentity says whether a template of p uses the sameas test: which object a value is
// is not data, and a module kept from another render holds objects equal to this render's,
// not always the same (the lists and dicts a snapshot makes anew at each sync).
func (p *Program) testsIdentity() bool {
	for _, t := range p.templates {
		if t == nil || t.tree == nil {
			continue
		}
		for _, u := range t.tree.Uses {
			if u.Test && u.Name == "sameas" {
				return true
			}
		}
	}
	return false
}

// readContext is vars[name], or vars[name][sub] when sub is set (name's value a record).
func readContext(vars map[string]any, name, sub string) (any, bool) {
	v, ok := vars[name]
	if !ok || sub == "" {
		return v, ok
	}
	switch m := v.(type) {
	case map[string]any:
		w, ok := m[sub]
		return w, ok
	case *record.Record:
		return m.Get(sub)
	}
	return v, false // not a dict: kept whole (see keep), so not asked
}

// contextNames are the names a template's source uses (every string of its tree: names,
// attributes, constants; more than it reads, never less), and of the templates it names
// (include, import, from: what they read is theirs), and, when every use of the name
// "resources" is resources.NAME or resources["NAME"], those NAMEs (nil: resources is read
// whole). ok is false for a template that extends another, or names one that is not in p.
func contextNames(p *Program, tree *parse.Tree) (names []string, subs []string, ok bool) {
	trees, ok := p.closure(tree)
	if !ok {
		return nil, nil, false
	}
	w := nameWalk{strs: map[string]bool{}, subs: map[string]bool{}}
	for _, t := range trees {
		if t.Extends {
			return nil, nil, false
		}
		w.walk(reflect.ValueOf(t.Body))
	}
	for s := range w.strs {
		names = append(names, s)
	}
	if w.resources > 0 && w.resources == w.resourcesSub {
		subs = []string{}
		for s := range w.subs {
			subs = append(subs, s)
		}
	}
	return names, subs, true
}

// closure is tree and the trees of every template it names, and they name, in key order after
// tree; ok is false when one is not in p (or does not compile).
func (p *Program) closure(tree *parse.Tree) ([]*parse.Tree, bool) {
	seen := map[string]bool{}
	var keys []string
	todo := slices.Clone(tree.Refs)
	for len(todo) > 0 {
		k := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[k] {
			continue
		}
		seen[k] = true
		t := p.templates[k]
		if t == nil || t.tree == nil || p.errs[k] != nil {
			return nil, false
		}
		keys = append(keys, k)
		todo = append(todo, t.tree.Refs...)
	}
	slices.Sort(keys)
	out := []*parse.Tree{tree}
	for _, k := range keys {
		out = append(out, p.templates[k].tree)
	}
	return out, true
}

// sources is the source of tree and of the templates it names (see closure): a kept module
// serves only while none of them changed.
func (p *Program) sources(tree *parse.Tree) string {
	if len(tree.Refs) == 0 {
		return tree.Src
	}
	trees, ok := p.closure(tree)
	if !ok {
		return tree.Src
	}
	var b strings.Builder
	for _, t := range trees {
		b.WriteString(t.Src)
		b.WriteByte(0)
	}
	return b.String()
}

type nameWalk struct {
	strs                    map[string]bool
	subs                    map[string]bool
	resources, resourcesSub int // uses of the name resources, and of them as resources.NAME
}

func (w *nameWalk) walk(v reflect.Value) { walkTree(v, w.visit) }

func (w *nameWalk) visit(v reflect.Value) bool {
	if v.Kind() == reflect.String {
		w.strs[v.String()] = true
		return true
	}
	switch x := v.Interface().(type) {
	case *parse.NameExpr:
		if x.Name == "resources" {
			w.resources++
		}
	case *parse.CallExpr:
		// resources.get("NAME", ...): that resource only.
		if a, ok := x.Fn.(*parse.AttrExpr); ok && a.Name == "get" && len(x.Args.List) > 0 {
			n, isName := a.Obj.(*parse.NameExpr)
			c, isConst := x.Args.List[0].(*parse.ConstExpr)
			if s, isStr := constString(c, isConst); isName && n.Name == "resources" && isStr {
				w.resources++
				w.resourcesSub++
				w.subs[s] = true
				w.strs[n.Name], w.strs[a.Name] = true, true
				w.walk(reflect.ValueOf(x.Args))
				return false
			}
		}
	case *parse.AttrExpr:
		// resources.NAME; resources.get (not called as above), .items, ...: read whole.
		if n, ok := x.Obj.(*parse.NameExpr); ok && n.Name == "resources" && !isDictMethod(x.Name) {
			w.resourcesSub++
			w.subs[x.Name] = true
		}
	case *parse.ItemExpr:
		if n, ok := x.Obj.(*parse.NameExpr); ok && n.Name == "resources" {
			if c, ok := x.Key.(*parse.ConstExpr); ok {
				if s, ok := c.Value.(string); ok {
					w.resourcesSub++
					w.subs[s] = true
				}
			}
		}
	}
	return true
}

// sameData says whether a and b are the same data: equal scalars, the same record or list,
// or equal contents. Values of other kinds are not compared (false).
func sameData(a, b any) bool {
	switch x := a.(type) {
	case nil, bool, int64, float64, string, int:
		return a == b
	case *record.Record:
		y, ok := b.(*record.Record)
		if !ok || y.Len() != x.Len() {
			return false
		}
		if x == y {
			return true
		}
		// A record's keys are sorted: the same data has the same key at each place, compared
		// without a lookup (records of one shape share their keys). The status writer's wave
		// makes every HTTPRoute anew, and the blocks compare their routes' specs.
		sameKeys := x.SameKeys(y)
		for i := range x.Len() {
			if !sameKeys && x.Key(i) != y.Key(i) || !sameData(x.Value(i), y.Value(i)) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, found := y[k]; !found || !sameData(v, w) {
				return false
			}
		}
		return true
	case map[string]string:
		y, ok := b.(map[string]string)
		return ok && maps.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) > 0 && &x[0] == &y[0] {
			return true // the same data: the context's is never changed (a record's list, read by a chain)
		}
		for i := range x {
			if !sameData(x[i], y[i]) {
				return false
			}
		}
		return true
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case *tainted:
		y, ok := b.(*tainted)
		return ok && *x == *y
	case []map[string]any:
		y, ok := b.([]map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameData(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func constString(c *parse.ConstExpr, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	s, ok := c.Value.(string)
	return s, ok
}
