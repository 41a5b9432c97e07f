package jinja

import (
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// What a loop's body reads (reuse_body.go): the names it reads of the frames around it, the
// loop variable among them, and whether it reads the loop object's position.

// bodyInfo is what a loop's body reads, worked out once per loop of a program.
type bodyInfo struct {
	names []string // read from the body's frame and those around it (the loop variables too)
	loop  bool     // reads loop.index and the like: the position is read too
	ok    bool     // false: never kept (it includes a template, calls loop(), reads loop.changed, ...)
	// loops: the body has a loop of its own, so that running it costs more than comparing a
	// few values the template made (ownSmall).
	loops bool
	// reads: what is read of names (nil: each name whole): a name the body uses only as
	// X.get(KEY) on a constant chain X of it is read by key (reuse_keyed.go); sites: those get
	// calls' positions, to the read's index.
	reads []freeRead
	sites map[int]int
}

// loopAttrs are the loop object's attributes a kept body may read: functions of the position
// (index0, length, depth0) only. previtem, nextitem and changed read the items around, or the
// state of the iterations before.
var loopAttrs = map[string]bool{"index": true, "index0": true, "revindex": true, "revindex0": true,
	"first": true, "last": true, "length": true, "depth": true, "depth0": true, "cycle": true}

// bodyReads works out what the body of s reads. Refused (ok false): a body that names another
// template (include, import, extends: its source may change apart from this one), has
// blocks, reads self or super, uses pongo2's statements or forloop, or reads the loop object
// other than by the attributes of loopAttrs.
func bodyReads(s *parse.ForStmt) bodyInfo {
	if printsOnly(s.Body) {
		return bodyInfo{}
	}
	w := bodyWalk{freeWalk: freeWalk{seen: map[string]bool{}, bound: map[string]int{}, ok: true, keyed: true}}
	w.stmts(s.Body)
	if !w.ok || w.seen["self"] || w.seen["super"] || w.seen["forloop"] {
		return bodyInfo{}
	}
	// The loop's own variables are read whole: they tell its iterations apart in the hash of
	// their reads, which a keyed read does not enter (every iteration's would be alike).
	for _, n := range targetNames(s.Target) {
		if u := w.uses[n]; u != nil {
			u.whole = true
		}
	}
	reads, sites := w.freeReads()
	if sites == nil {
		reads = nil // each name whole
	}
	return bodyInfo{names: w.names, loop: w.loop, ok: true, loops: w.loops, reads: reads, sites: sites}
}

// bodyWalk is freeWalk with two more things: the body is refused when it names another
// template, and the loop object of the loop walked (loop, where no inner loop binds it) is
// read only by its position's attributes. As freeWalk, a name a statement list sets before
// reading it is not read from outside (freeWalk.stmts).
type bodyWalk struct {
	freeWalk
	loop  bool
	loops bool // a loop in the body
}

// stmts walks a statement list that runs in a frame of its own (freeWalk.stmts: what it sets
// before reading it is its own).
func (w *bodyWalk) stmts(list []parse.Stmt) { w.freeWalk.stmts(list, w.walk) }

func (w *bodyWalk) walk(v reflect.Value) { walkTree(v, w.visit) }

func (w *bodyWalk) visit(v reflect.Value) bool {
	if v.Kind() == reflect.String || !w.ok {
		return false
	}
	switch x := v.Interface().(type) {
	case *parse.IncludeStmt, *parse.ImportStmt, *parse.FromImportStmt, *parse.ExtendsStmt, *parse.BlockStmt:
		w.ok = false
		return false
	case *parse.AttrExpr:
		if n, ok := x.Obj.(*parse.NameExpr); ok && n.Name == "loop" && w.bound["loop"] == 0 {
			if !loopAttrs[x.Name] {
				w.ok = false
			}
			w.loop = true
			return false
		}
	case *parse.NameExpr:
		if x.Name == "loop" && w.bound["loop"] == 0 {
			w.ok = false // the loop object itself: stored, passed, called (loop(x))
			return false
		}
	case *parse.CallExpr:
		if w.noteKeyed(x) {
			w.walk(reflect.ValueOf(x.Args))
			return false
		}
	case *parse.ForStmt:
		w.loops = true
		w.walk(reflect.ValueOf(x.Iter))
		// The filter sees the loop's names but not its loop object: `loop` there is the loop
		// around it (lazy_filter.go), whose position it may read.
		targets, loops := targetNames(x.Target), []string{"loop", "forloop"}
		w.bind(targets, 1)
		w.walk(reflect.ValueOf(x.Filter))
		w.bind(loops, 1)
		w.stmts(x.Body)
		w.bind(loops, -1)
		w.bind(targets, -1)
		w.walk(reflect.ValueOf(x.Else))
		return false
	case *parse.MacroDef:
		w.walk(reflect.ValueOf(x.Defaults))
		names := append([]string{"varargs", "kwargs", "caller"}, x.Params...)
		w.bind(names, 1)
		w.stmts(x.Body)
		w.bind(names, -1)
		return false
	case *parse.WithStmt:
		w.walk(reflect.ValueOf(x.Values))
		var names []string
		for _, t := range x.Targets {
			names = append(names, targetNames(t)...)
		}
		w.bind(names, 1)
		w.stmts(x.Body)
		w.bind(names, -1)
		return false
	}
	return w.freeWalk.visit(v)
}

// printsOnly says whether a body only prints text and values read by name, attribute or item
// (`{{ e.key }} {{ e.backend }}`): running it costs less than looking a kept iteration up and
// checking what it read, so such a body is not kept (the routes.map loops of the Ingress
// examples: 10,000 iterations at each render).
func printsOnly(body []parse.Stmt) bool {
	for _, st := range body {
		switch x := st.(type) {
		case *parse.TextStmt:
		case *parse.PrintStmt:
			if !plainRead(x.X) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// plainRead: a name, a constant, or an attribute or item of a plain read by a constant.
func plainRead(x parse.Expr) bool {
	switch x := x.(type) {
	case *parse.NameExpr:
		return x.Name != "loop" && x.Name != "forloop" && x.Name != "self" && x.Name != "super"
	case *parse.ConstExpr:
		return true
	case *parse.AttrExpr:
		return plainRead(x.Obj)
	case *parse.ItemExpr:
		_, konst := x.Key.(*parse.ConstExpr)
		return konst && plainRead(x.Obj)
	}
	return false
}
