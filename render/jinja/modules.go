package jinja

import (
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
	"math/big"
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// What Modules does (the type is with the evaluator's state, eval.go): it keeps a module for
// the renders that share it, and hands each import the module's values as its own: the module
// ModuleCache keeps lent (a view of it, copied on a template's first change: ModuleCache.take,
// renew), another a copy.

// Last says that the renders to come are the last to share these modules: an import then
// takes the module kept rather than a copy of it (nobody else will), and it is forgotten.
// (The Ingress example's routes at 1,000 Ingresses: 1.3 MB a rendering.)
func (s *Modules) Last() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = true
}

// get returns a copy of the module computed for key (source src) with the context vars, for
// an import from the top-level frame f by the render e: its macros see f behind the module's
// own top level, as they would had the module been computed for this import. The module that
// ModuleCache keeps for the next render is not copied but lent to e (ModuleCache.take). nil:
// none to share (or the kept one was changed by a template, or another render has it).
func (s *Modules) get(key, src string, vars map[string]any, f *frame, readOnly bool, e *evaluator) *module {
	s.mu.Lock()
	defer s.mu.Unlock()
	sm, ok := s.m[key]
	if !ok || sm.src != src || s.vars != identity(vars) {
		return nil
	}
	if sm.kept != nil && (sm.kept.view || sm.kept.spoiled.Load()) {
		m, k := s.Across.take(sm.kept, e, f)
		switch {
		case m == nil:
			delete(s.m, key) // computed again (and kept again)
		case k != sm.kept:
			s.m[key] = sharedModule{src: src, mod: k.mod, macros: sm.macros, kept: k}
		}
		return m
	}
	if readOnly && !sm.macros {
		// An importer that only reads, of a module without macros (which would see the
		// importer's frame, and could change the module's values): the kept copy itself.
		return sm.mod
	}
	if s.last && sm.kept == nil {
		delete(s.m, key)
		sm.mod.frame.parent = f // nobody else has this copy
		keep(sm.mod.frame)
		return sm.mod
	}
	m, _ := copyModule(sm.mod, f)
	return m
}

// put keeps a copy of m, computed for key (source src) with the context vars, if it can be
// copied.
func (s *Modules) put(key, src string, vars map[string]any, m *module) {
	c, ok := copyModule(m, nil)
	if !ok {
		return
	}
	s.store(key, src, vars, c, nil)
}

// putKept keeps k, the module that ModuleCache keeps for the next render: the files share it
// (lent to each in turn, or copied) rather than a copy of their own.
func (s *Modules) putKept(key, src string, vars map[string]any, k *keptModule) {
	s.store(key, src, vars, k.mod, k)
}

func (s *Modules) store(key, src string, vars map[string]any, c *module, kept *keptModule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := identity(vars); s.vars != id {
		s.vars, s.m = id, map[string]sharedModule{}
	}
	s.m[key] = sharedModule{src: src, mod: c, macros: hasMacros(c), kept: kept}
}

func identity(vars map[string]any) uintptr { return reflect.ValueOf(vars).Pointer() }

// copyModule copies m for an import from the frame parent: its top level (a new frame in
// front of parent) and its exported values, one copy of each object however many names hold
// it, its macros seeing the new top level. ok is false when m holds what cannot be copied
// (see copier.copy).
func copyModule(m *module, parent *frame) (*module, bool) {
	c, ok, _ := copyModuleOwned(m, parent, nil)
	return c, ok
}

// copyModuleOwned is copyModule, the dicts and lists of the copy owner's (Dict.owner); view
// says whether the copy can be shared by the imports that take it (viewModule): what a
// template can change in it goes through a dict's or a list's methods (which spoil it), and
// its macros are at its top level, seeing that only: no macro in its dicts, lists and
// namespaces, no tuple (which retaint changes in place).
func copyModuleOwned(m *module, parent *frame, owner *loan) (cm *module, ok bool, view bool) {
	c := copier{seen: make(map[any]any, m.objects), from: m.frame, owner: owner}
	if m.frame != nil {
		c.to = &frame{parent: parent, names: append([]string(nil), m.frame.names...), vals: make([]any, len(m.frame.vals)), ctx: m.frame.ctx, top: m.frame.top}
		keep(c.to)
		for i, v := range m.frame.vals {
			cv, ok := c.copy(v)
			if !ok {
				return nil, false, false
			}
			c.to.vals[i] = cv
		}
	}
	c.depth = -1 // the exported names are the top level's
	vars, ok := c.copy(m.vars)
	if !ok {
		return nil, false, false
	}
	cm = &module{name: m.name, vars: vars.(*Dict), output: m.output, secret: m.secret, frame: c.to, objects: len(c.seen)}
	return cm, true, !c.inner
}

// copier copies what a template can change in a module's values (its dicts, lists and
// namespaces), and its macros; values nothing can change are shared. Each object is copied
// once (seen): two names for one dict stay one dict.
type copier struct {
	seen     map[any]any
	from, to *frame // the module's top level, and the copy's
	owner    *loan  // of the dicts and lists it makes
	depth    int    // inside a dict, list, namespace or tuple (not at the module's top level)
	inner    bool   // it copied a tuple, or a macro inside a dict, list or namespace
}

// copy copies v. ok is false for a value it cannot copy: a macro defined elsewhere than at
// the module's top level (its closure is not the module's to replace), a generator or cycler
// with its state, a dict keyed by such a value.
func (c *copier) copy(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup, *tainted, *big.Int, *Undefined, *builtin, *rangeVal:
		return v, true
	case map[string]any, map[string]string, []any, []string, []map[string]any, *record.Record:
		return v, true // from the context: templates cannot change it
	case Tuple:
		c.inner = true
		out := make(Tuple, len(x))
		for i, e := range x {
			cv, ok := c.copy(e)
			if !ok {
				return nil, false
			}
			out[i] = cv
		}
		return out, true
	}
	switch v.(type) {
	case *Macro, *List, *Dict, *Namespace:
		// Pointers only: a map key of another type might not be comparable.
		if done, ok := c.seen[v]; ok {
			if _, isMacro := v.(*Macro); isMacro && c.depth > 0 {
				c.inner = true
			}
			return done, true
		}
	}
	switch v.(type) {
	case *Macro:
		if c.depth > 0 {
			c.inner = true
		}
	case *List, *Dict, *Namespace:
		c.depth++
		defer func() { c.depth-- }()
	}
	switch x := v.(type) {
	case *Macro:
		if c.from == nil || x.closure != c.from {
			return nil, false
		}
		out := &Macro{def: x.def, closure: c.to, tmpl: x.tmpl, escape: x.escape}
		c.seen[v] = out
		return out, true
	case *List:
		out := newList(len(x.items)) // one object with its items (a module's small lists)
		out.owner = c.owner
		c.seen[v] = out
		for i, e := range x.items {
			cv, ok := c.copy(e)
			if !ok {
				return nil, false
			}
			out.items[i] = cv
		}
		return out, true
	case *Dict:
		out := dictOfLen(len(x.keys)) // one object with its keys and values (small dicts)
		out.owner = c.owner
		c.seen[v] = out
		for i, k := range x.keys {
			switch k.(type) {
			case string, Markup, int64, bool, float64, nil:
			default:
				if hk, err := keyOf(k); err != nil || hk.kind == 'p' {
					return nil, false // keyed by an object's identity
				}
			}
			cv, ok := c.copy(x.vals[i])
			if !ok {
				return nil, false
			}
			out.keys[i], out.vals[i] = k, cv
		}
		out.index = x.index.clone()
		return out, true
	case *Namespace:
		out := &Namespace{}
		c.seen[v] = out
		attrs, ok := c.copy(x.attrs)
		if !ok {
			return nil, false
		}
		out.attrs = attrs.(*Dict)
		return out, true
	}
	return nil, false
}

func hasMacros(m *module) bool {
	if m.frame == nil {
		return false
	}
	for _, v := range m.frame.vals {
		if _, ok := v.(*Macro); ok {
			return true
		}
	}
	return false
}

// readsOnly says whether a template changes nothing it is given: it names no method that
// changes a dict or a list (called or not), sets no namespace's attribute, and names no
// template (one it includes could).
func readsOnly(tree *parse.Tree) bool {
	if tree == nil || tree.Extends {
		return false
	}
	w := mutationWalk{}
	w.walk(reflect.ValueOf(tree.Body))
	return !w.found
}

type mutationWalk struct {
	found   bool
	imports int
}

func (w *mutationWalk) walk(v reflect.Value) { walkTree(v, w.visit) }

func (w *mutationWalk) visit(v reflect.Value) bool {
	if v.Kind() == reflect.String {
		return true
	}
	if w.found {
		return false
	}
	switch x := v.Interface().(type) {
	case *parse.AttrExpr:
		switch x.Name {
		case "append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort", "update", "setdefault", "popitem":
			w.found = true
		}
	case *parse.IncludeStmt, *parse.FromImportStmt:
		w.found = true // what it includes or imports could change what it is given
	case *parse.ImportStmt:
		// One import: the module served (get); another could change it.
		w.imports++
		w.found = w.imports > 1
	case parse.Target:
		w.found = x.Attr != ""
	}
	return !w.found
}

// viewModule is m (a kept module: viewable) for an import from the frame parent, its values
// shared: only its top level is new (a frame in front of parent), and its macros, which see
// that frame. A change of a shared dict, list or namespace spoils m (its loan): the import
// that changed it has it to itself from then on, and m serves no other.
func viewModule(m *module, parent *frame) *module {
	v := &module{name: m.name, output: m.output, secret: m.secret, objects: m.objects}
	macros := map[*Macro]*Macro{}
	rebind := func(x any) any {
		mac, ok := x.(*Macro)
		if !ok {
			return x
		}
		if out, done := macros[mac]; done {
			return out
		}
		out := &Macro{def: mac.def, closure: v.frame, tmpl: mac.tmpl, escape: mac.escape}
		macros[mac] = out
		return out
	}
	if m.frame != nil {
		v.frame = &frame{parent: parent, names: append([]string(nil), m.frame.names...), vals: make([]any, len(m.frame.vals)), ctx: m.frame.ctx, top: m.frame.top}
		keep(v.frame)
		for i, x := range m.frame.vals {
			v.frame.vals[i] = rebind(x)
		}
	}
	v.vars = dictOfLen(len(m.vars.keys))
	copy(v.vars.keys, m.vars.keys)
	v.vars.index = m.vars.index.clone()
	for i, x := range m.vars.vals {
		v.vars.vals[i] = rebind(x)
	}
	return v
}

// adoptModule makes m's own dicts and lists l's, when m can be kept as it is rather than
// copied (the copy copyModuleOwned would make, lendable): each a copier would copy, no tuple,
// its macros at its top level only. Those another loan still owns stay its when all of that
// loan's are its own (whole: a part imported in a loop, lent to the render): l becomes its
// dependent, spoiled with it (on: those loans); any other (a memo's: readMemo) fails. false:
// nothing changed (a copy is kept).
func adoptModule(m *module, l *loan) (on []*loan, ok bool) {
	a := &adopter{l: l, from: m.frame}
	if !a.module(m) {
		return nil, false
	}
	for o := range a.on {
		on = append(on, o)
	}
	return on, true
}

// ownModule makes m's dicts and lists l's, when m can be lent as it is (lendable) and none of
// them is another's (a loan's still): a module imported in a loop, kept as the render made it
// rather than a copy (loopKeep). held are m's containers (moduleContainers). false: nothing
// changed.
func ownModule(m *module, held map[any]bool, l *loan) bool {
	return lendableHolding(m, held) && (&adopter{l: l, from: m.frame, alone: true}).module(m)
}

// module adopts m's values (adoptModule); false: none adopted, and a.l depends on no loan.
func (a *adopter) module(m *module) bool {
	ok := true
	if m.frame != nil {
		for _, v := range m.frame.vals {
			if ok = a.adopt(v, 0); !ok {
				break
			}
		}
	}
	if ok {
		ok = a.adopt(m.vars, -1) // the exported names are the top level's
	}
	if ok {
		return true
	}
	if m.frame != nil {
		for _, v := range m.frame.vals {
			disown(v, a.l)
		}
	}
	disown(m.vars, a.l)
	for o := range a.on {
		o.undepend(a.l)
	}
	return false
}

type adopter struct {
	l     *loan
	from  *frame
	on    map[*loan]bool // the loans whose values the module holds as they are (lean)
	alone bool           // leans on no loan: a value another's fails
	// last: the loan lean last found in on (or added): a list's items come in runs of one
	// loan's (the Ingress example's routes: 30,000 items of 160 blocks' parts), looked up
	// once a run rather than once an item.
	last *loan
}

// lean makes a.l a dependent of o, the owner of a dict or list the module holds, rather than
// taking the value (or, failing, copying the module): o's values are all its own (whole), and
// a change of one spoils o, and so a.l too, before it is made.
func (a *adopter) lean(o *loan) bool {
	if o == a.last || a.on[o] {
		a.last = o
		return true
	}
	if a.alone || !o.whole || !o.depend(a.l) {
		return false
	}
	if a.on == nil {
		a.on = map[*loan]bool{}
	}
	a.on[o] = true
	a.last = o
	return true
}

// adopt makes v's dicts and lists a.l's (see adoptModule); depth is how deep in dicts, lists
// and namespaces v is. Those already a.l's were walked.
func (a *adopter) adopt(v any, depth int) bool {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup, *tainted, *big.Int, *Undefined, *builtin, *rangeVal:
		return true
	case map[string]any, map[string]string, []any, []string, []map[string]any, *record.Record:
		return true
	case *Macro:
		return depth <= 0 && a.from != nil && x.closure == a.from
	case *Namespace:
		return a.adopt(x.attrs, depth+1)
	case *List:
		if x.owner == a.l {
			return true
		}
		if x.owner != nil && !x.owner.spoiled.Load() {
			return a.lean(x.owner)
		}
		x.owner = a.l
		for _, e := range x.items {
			if !a.adopt(e, depth+1) {
				return false
			}
		}
		return true
	case *Dict:
		if x.owner == a.l {
			return true
		}
		if x.owner != nil && !x.owner.spoiled.Load() {
			return a.lean(x.owner)
		}
		x.owner = a.l
		for i, k := range x.keys {
			switch k.(type) {
			case string, Markup, int64, bool, float64, nil:
			default:
				if hk, err := keyOf(k); err != nil || hk.kind == 'p' {
					return false // keyed by an object's identity (copier.copy)
				}
			}
			if !a.adopt(x.vals[i], depth+1) {
				return false
			}
		}
		return true
	}
	return false // a tuple (retaint changes it in place), a generator, ...
}

// disown undoes adopt: v's dicts and lists that are l's are nobody's, counted in l's disowns
// (a reader that saw them l's, and l not spoiled, must see that they may be no longer).
func disown(v any, l *loan) {
	switch x := v.(type) {
	case *Namespace:
		disown(x.attrs, l)
	case *List:
		if x.owner == l {
			x.owner = nil
			l.disowns.Add(1)
			for _, e := range x.items {
				disown(e, l)
			}
		}
	case *Dict:
		if x.owner == l {
			x.owner = nil
			l.disowns.Add(1)
			for _, e := range x.vals {
				disown(e, l)
			}
		}
	}
}
