package jinja

import (
	"reflect"
	"slices"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A name a statement list binds (set, set block, macro) before it reads it is the list's own
// from there on: the list's later statements, and what they nest (ifs, loops, macros defined
// after it), read its value, not the frames around. This holds for a module's top (what a
// module imported with context in a loop sets first is not read of its importer: a block's own
// notes, say, while the importer's change as it goes) and for a loop's, macro's or with
// block's body (a frame of its own). As Jinja2: a read before the set, even in a macro
// defined before it and called after, reads the frames around (or, in Jinja2, nothing); a set
// in an if, a loop, a with or a filter block binds nothing after it (it may not run, or binds
// in a frame of its own), nor does set ns.attr (it reads ns). Those stay reads: never wrong,
// only less reuse.

// stmts walks list with walk, binding in w, for the statements after each, the names a set,
// set block or macro statement of the list itself binds.
func (w *freeWalk) stmts(list []parse.Stmt, walk func(reflect.Value)) {
	var bound []string
	for _, s := range list {
		var names []string
		switch x := s.(type) {
		case *parse.SetStmt:
			walk(reflect.ValueOf(x.X))
			names = plainTargetNames(x.Target)
			if names == nil {
				walk(reflect.ValueOf(x.Target))
			}
		case *parse.SetBlockStmt:
			walk(reflect.ValueOf(x.Filters))
			walk(reflect.ValueOf(x.Body))
			names = plainTargetNames(x.Target)
			if names == nil {
				walk(reflect.ValueOf(x.Target))
			}
		case *parse.MacroStmt:
			walk(reflect.ValueOf(x))
			names = []string{x.Macro.Name}
		default:
			walk(reflect.ValueOf(s))
		}
		// self and super stay the importer's blocks' (freeNames refuses a module reading them).
		names = slices.DeleteFunc(names, func(n string) bool { return n == "self" || n == "super" })
		w.bind(names, 1)
		bound = append(bound, names...)
	}
	w.bind(bound, -1)
}

// plainTargetNames are the names a target binds when it binds names only (not ns.attr); nil
// otherwise.
func plainTargetNames(t parse.Target) []string {
	if t.Attr != "" {
		return nil
	}
	if t.Name != "" {
		return []string{t.Name}
	}
	var out []string
	for _, it := range t.Items {
		n := plainTargetNames(it)
		if n == nil {
			return nil
		}
		out = append(out, n...)
	}
	return out
}

// plainLoopVar is the one plain name t binds (`for s in ...`), "" for a tuple or ns.attr.
func plainLoopVar(t parse.Target) string {
	if t.Tuple || t.Attr != "" {
		return ""
	}
	return t.Name
}
