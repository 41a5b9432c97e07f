package jinja

import (
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A name that a module imported in a loop uses only as name.a.b (constant attribute names)
// is read as those chains rather than whole: the per-route part of the HTTPRoute example
// reads route.metadata.name, route.spec.rules... and not route, whose status and
// resourceVersion the status writer changes. Its values are then the same after a status
// write, and the kept part serves. A chain stops before an attribute name that is a method of
// some value (items, get, upper...): getAttr may give the method then, and what a call of it
// does depends on more than the value's contents seen so far. Any other use of the name
// (printed, passed, iterated, tested, subscripted, ns.attr assigned) reads it whole. The
// values are those e.getAttr finds, step by step, as the module's own evaluation would; a
// step from anything but data (none, a record, a map, a dict, a namespace) is not followed: the
// read is then never the same (chainStop), and the module is computed, as today for a loop
// object.

// freeRead is one read of an import: a name whole (chain nil), or a chain of attributes of it;
// keyed: only the keys the module looks up in it with get (reuse_keyed.go).
type freeRead struct {
	name  int // in freeInfo.names
	chain []string
	keyed bool
}

// nameUse is how a template uses one free name: whole somewhere, or only through chains, and
// chains it only calls get on (keyed).
type nameUse struct {
	whole  bool
	chains [][]string
	keyed  [][]string
}

// chainStop is the read of a chain whose step was from a value that is not data, or from an
// undefined one: never the same as another (sameValue), never hashed.
type chainStop struct{}

// missRead is the read of a chain whose last attribute is missing from data (a record or
// a map from the context, which never change): the module finds an Undefined of that
// object and name, the same for the same object's contents.
type missRead struct {
	obj  any
	name string
}

// addChain notes that the free name n is read as n.chain.
func (w *freeWalk) addChain(n string, chain []string) {
	if w.bound[n] > 0 {
		return
	}
	w.note(n)
	u := w.use(n)
	if !slices.ContainsFunc(u.chains, func(o []string) bool { return slices.Equal(o, chain) }) {
		u.chains = append(u.chains, chain)
	}
}

func (w *freeWalk) use(n string) *nameUse {
	u := w.uses[n]
	if u == nil {
		u = &nameUse{}
		if w.uses == nil {
			w.uses = map[string]*nameUse{}
		}
		w.uses[n] = u
	}
	return u
}

// visitAttr notes an attribute chain on a name (false: it was one, and is read).
func (w *freeWalk) visitAttr(x *parse.AttrExpr) bool {
	n, chain := attrChain(x)
	if n == nil {
		return true
	}
	if len(chain) == 0 || n.Name == "self" || n.Name == "super" {
		w.add(n.Name)
	} else {
		w.addChain(n.Name, chain)
	}
	return false
}

// attrChain is x as name.a.b...: the name and the attributes before the first that is a
// method name; nil when x is not on a name.
func attrChain(x *parse.AttrExpr) (*parse.NameExpr, []string) {
	var rev []string
	var obj parse.Expr = x
	for {
		a, ok := obj.(*parse.AttrExpr)
		if !ok {
			break
		}
		rev = append(rev, a.Name)
		obj = a.Obj
	}
	n, ok := obj.(*parse.NameExpr)
	if !ok {
		return nil, nil
	}
	slices.Reverse(rev)
	for i, a := range rev {
		if anyMethod(a) {
			return n, rev[:i]
		}
	}
	return n, rev
}

// anyMethod says whether some value has a method or property called name (getAttr).
func anyMethod(name string) bool {
	if isDictMethod(name) || isListMethod(name) || isStrMethod(name) {
		return true
	}
	switch name {
	case "striptags", "unescape", "escape", "count", "index", "bit_length", "conjugate", "is_integer",
		"real", "imag", "numerator", "denominator", "cycle", "changed", "next", "reset":
		return true
	}
	return false
}

// freeReads are the reads of a walked template, in names order: nil when every name is read
// whole. Of a name's chains, one that another is a prefix of is left out (its value is that
// one's attribute). A chain only called get on is read by key when no other use of the name
// is on it or inside it (sites: the calls' positions, to the read's index); else it is read
// as a chain (whole, for the name itself).
func (w *freeWalk) freeReads() (reads []freeRead, sites map[int]int) {
	some := false
	for _, u := range w.uses {
		some = some || !u.whole
	}
	if !some {
		return nil, nil
	}
	var out []freeRead
	for i, n := range w.names {
		u := w.uses[n]
		keyed := u.plainKeyed(w.chains)
		if u.whole {
			out = append(out, freeRead{name: i})
			continue
		}
		for _, c := range u.chains {
			if !subsumed(c, u.chains) {
				out = append(out, freeRead{name: i, chain: c})
			}
		}
		for _, k := range keyed {
			for _, s := range w.sites {
				if s.name == n && slices.Equal(s.chain, k) {
					if s.tmpl != "" {
						w.nestedSite(s, len(out))
						continue
					}
					if sites == nil {
						sites = map[int]int{}
					}
					sites[s.pos] = len(out)
				}
			}
			out = append(out, freeRead{name: i, chain: k, keyed: true})
		}
	}
	return out, sites
}

// plainKeyed leaves in u.keyed the chains no other use of the name is on or inside (a chain,
// another keyed chain), and makes the others chains (the name itself, or without chains (a
// loop body's reads): whole); those left.
func (u *nameUse) plainKeyed(chains bool) [][]string {
	var left [][]string
	for _, k := range u.keyed {
		clash := slices.ContainsFunc(u.chains, func(c []string) bool { return nested(c, k) }) ||
			slices.ContainsFunc(u.keyed, func(o []string) bool { return !slices.Equal(o, k) && nested(o, k) })
		switch {
		case !clash:
			left = append(left, k)
		case len(k) == 0 || !chains:
			u.whole = true
		case !slices.ContainsFunc(u.chains, func(c []string) bool { return slices.Equal(c, k) }):
			u.chains = append(u.chains, k)
		}
	}
	return left
}

// nested says whether a is a prefix of b or b of a.
func nested(a, b []string) bool {
	n := min(len(a), len(b))
	return slices.Equal(a[:n], b[:n])
}

// keyedSite is a call name.chain.get(KEY[, DEFAULT]) of a template (pos: the call's).
type keyedSite struct {
	pos   int
	name  string
	chain []string
	tmpl  string // the template of the call: "" the one walked, else the key of one it imports
}

// visitCall notes a call X.get(KEY[, DEFAULT]) on a free name's constant attribute chain X as a
// keyed read of X, and walks its arguments (false: it was one).
func (w *freeWalk) visitCall(x *parse.CallExpr) bool {
	if !w.noteKeyed(x) {
		return true
	}
	w.walkAll(x.Args)
	return false
}

// noteKeyed notes x as a keyed read when it is a call X.get(KEY[, DEFAULT]) on a free name's
// constant attribute chain X (true: its arguments are left to the caller to walk).
func (w *freeWalk) noteKeyed(x *parse.CallExpr) bool {
	n, chain, ok := keyedCall(x)
	if !ok || w.bound[n] > 0 {
		return false
	}
	w.note(n)
	u := w.use(n)
	if !slices.ContainsFunc(u.keyed, func(o []string) bool { return slices.Equal(o, chain) }) {
		u.keyed = append(u.keyed, chain)
	}
	w.sites = append(w.sites, keyedSite{pos: x.Pos, name: n, chain: chain, tmpl: w.tmpl})
	return true
}

// keyedCall is x as name.a.b.get(KEY[, DEFAULT]), no attribute of the chain a method name.
func keyedCall(x *parse.CallExpr) (string, []string, bool) {
	a, ok := x.Fn.(*parse.AttrExpr)
	if !ok || a.Name != "get" || len(x.Args.List) < 1 || len(x.Args.List) > 2 || len(x.Args.Kw) > 0 ||
		x.Args.Star != nil || x.Args.StarKw != nil {
		return "", nil, false
	}
	var chain []string
	obj := a.Obj
	for {
		at, ok := obj.(*parse.AttrExpr)
		if !ok {
			break
		}
		if anyMethod(at.Name) {
			return "", nil, false
		}
		chain = append(chain, at.Name)
		obj = at.Obj
	}
	n, ok := obj.(*parse.NameExpr)
	if !ok || n.Name == "self" || n.Name == "super" {
		return "", nil, false
	}
	slices.Reverse(chain)
	return n.Name, chain, true
}

// subsumed says whether another of chains is a prefix of c.
func subsumed(c []string, chains [][]string) bool {
	for _, o := range chains {
		if len(o) < len(c) && slices.Equal(o, c[:len(o)]) {
			return true
		}
	}
	return false
}

// readVals are the values of fi's reads from the values of its names (base).
func (e *evaluator) readVals(base []any, fi freeInfo, vals []any) {
	for j, r := range fi.reads {
		vals[j] = base[r.name]
		if r.chain != nil {
			vals[j] = e.chainValue(vals[j], r.chain)
		}
	}
}

// chainValue is v.chain[0].chain[1]... as the module's evaluation finds it.
func (e *evaluator) chainValue(v any, chain []string) any {
	if _, ok := v.(notSet); ok {
		return v // the module's first step fails, as for the name read whole
	}
	for i, a := range chain {
		switch v.(type) {
		case nil, *record.Record, map[string]any, map[string]string, *Dict, *Namespace:
		default:
			return chainStop{}
		}
		w, err := e.getAttr(v, a)
		if err != nil {
			return chainStop{}
		}
		if u, ok := w.(*Undefined); ok {
			if i < len(chain)-1 || !dataMiss(u, v) {
				return chainStop{}
			}
			return missRead{obj: v, name: a}
		}
		v = w
	}
	return v
}

// dataMiss says whether u is obj.name missing, obj none or data from the context (never
// changed).
func dataMiss(u *Undefined, obj any) bool {
	if !u.hasObj || u.err != nil || u.hint != "" {
		return false
	}
	switch obj.(type) {
	case nil, *record.Record, map[string]any, map[string]string:
		return true
	}
	return false
}
