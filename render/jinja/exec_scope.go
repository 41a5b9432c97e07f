package jinja

import (
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A frame's own names, as Jinja2's compiler (idtracking) decides them: a name a template's top
// level sets (set, set block, macro, import, from import) is a local of the template from its
// start. Where its first mention at the top level is a read, the local starts as the
// context's value (the importer's, for a module imported with context): the engine's lookup
// through the frames finds the same. Where it is a set (outside an if), the local starts
// undefined: what reads it before the set runs (a macro defined before and called before the
// set, a loop, with or filter block before it) reads undefined, not the context's value.
// The frames inside (a loop's body, at each iteration, its else, a macro's, a with, filter,
// set or autoescape block's, a block's) follow the same rule, but that a name a frame around
// mentions (anywhere in it) starts as the value there, as the engine's lookup finds it. The
// engine binds a name that starts undefined to unsetName when its frame starts; the lookup
// finds it as not set.
//
// Another template's frames are not its locals: an included template, a module imported
// with context, a block (which Jinja2 renders from the context, not the template's locals)
// see the context's value of a name their includer has not set yet. Their frames are
// marked top; a lookup from inside one passes over the unsetName of the frames outside it.
//
// Not followed (the engine reads the frames around, as before): a parent template
// ({% extends %}) whose name the child set already (Jinja2's parent starts it undefined for
// its own macros and loops, its blocks see the child's); a module imported with context reads
// its importer's frames as they are when it reads them (Jinja2: as they were at the import);
// pongo2's statements' bodies.

// unsetName marks, in a frame, a name the frame's body sets later (scanScopes), not set yet.
type unsetName struct{}

// scopes are the names each frame of a template starts undefined: its top level's (top) and,
// by node, those of the bodies inside it (in): a loop's (its ForStmt) and its else's
// (&ForStmt.Else), a macro's or a call block's caller's (the MacroDef), a with, filter, set
// or autoescape block's (the statement), a block's (the BlockStmt).
type scopes struct {
	top []string
	in  map[any][]string
}

// scanScopes works out the scopes of a template's body.
func scanScopes(body []parse.Stmt) scopes {
	var sc scopes
	sc.top = sc.scan(frameScan{body: body}, nil)
	return sc
}

// frameScan is a frame of the template: its body, the names bound at its start (a loop's
// targets, a macro's parameters, a with block's targets), what it reads first (a macro's
// defaults, a filter block's filters).
type frameScan struct {
	key    any
	params []string
	pre    any
	body   []parse.Stmt
	alone  bool // a block: no frames around it (Jinja2 renders it from the context)
}

// scan returns the names the frame fs starts undefined: those its level sets before any
// mention there, outside an if (Jinja2's branches leave a name set only in them the
// context's), that no frame around it (around: what each mentions) mentions, and that a frame
// inside it before the set mentions (frameNames.kidReads); and notes those of the frames
// inside it. A frame's level holds its statements, but the bodies of loops,
// macros, call, filter, set, with and autoescape blocks and blocks, frames of their own: what
// they are given where they are (a loop's iterable, a with's values, a call's and a filter
// block's filters) is of the level.
func (sc *scopes) scan(fs frameScan, around []map[string]bool) []string {
	lv := frameNames{seen: map[string]bool{}}
	for _, p := range fs.params {
		lv.seen[p] = true
	}
	lv.reads(fs.pre)
	lv.stmts(fs.body, false)
	var unset []string
	for _, n := range lv.unset {
		if !mentioned(around, n) {
			unset = append(unset, n)
		}
	}
	inner := append(around[:len(around):len(around)], lv.seen)
	for _, k := range lv.kids {
		a := inner
		if k.alone {
			a = nil
		}
		if u := sc.scan(k, a); len(u) > 0 {
			if sc.in == nil {
				sc.in = map[any][]string{}
			}
			sc.in[k.key] = u
		}
	}
	return unset
}

func mentioned(around []map[string]bool, n string) bool {
	for _, m := range around {
		if m[n] {
			return true
		}
	}
	return false
}

// frameNames is the scan of one frame's level.
type frameNames struct {
	seen  map[string]bool
	unset []string
	kids  []frameScan
	// kidReads: the names the frames inside it met so far mention. Only they can read a name
	// of the level before its set (what the level itself reads before is a mention): a name
	// they do not mention needs no unsetName (the lookups of every name through the frame,
	// the top's especially, pass over what it binds).
	kidReads map[string]bool
}

// kid notes a frame inside the level.
func (a *frameNames) kid(fs frameScan) {
	a.kids = append(a.kids, fs)
	if a.kidReads == nil {
		a.kidReads = map[string]bool{}
	}
	names(fs.pre, a.kidReads)
	names(fs.body, a.kidReads)
}

func (a *frameNames) stmts(list []parse.Stmt, inIf bool) {
	for _, s := range list {
		a.stmt(s, inIf)
	}
}

func (a *frameNames) stmt(s parse.Stmt, inIf bool) {
	switch x := s.(type) {
	case *parse.TextStmt, *parse.ExtendsStmt, *parse.LoopControlStmt:
	case *parse.PrintStmt:
		a.reads(x.X)
	case *parse.DoStmt:
		a.reads(x.X)
	case *parse.IfStmt:
		a.reads(x.Conds)
		for _, b := range x.Bodies {
			a.stmts(b, true)
		}
		a.stmts(x.Else, true)
	case *parse.ForStmt:
		a.reads(x.Iter)
		a.kid(frameScan{key: x, params: append(targetNames(x.Target), "loop", "forloop"), body: x.Body})
		if len(x.Else) > 0 {
			a.kid(frameScan{key: &x.Else, body: x.Else})
		}
	case *parse.SetStmt:
		a.reads(x.X)
		a.target(x.Target, inIf)
	case *parse.SetBlockStmt:
		a.kid(frameScan{key: x, body: x.Body}) // it runs before the set: its reads come first
		a.target(x.Target, inIf)
	case *parse.WithStmt:
		a.reads(x.Values)
		var bound []string
		for _, t := range x.Targets {
			bound = append(bound, targetNames(t)...)
		}
		a.kid(frameScan{key: x, params: bound, body: x.Body})
	case *parse.MacroStmt:
		a.set(x.Macro.Name, inIf)
		a.kid(macroScan(x.Macro))
	case *parse.CallBlockStmt:
		a.reads(x.Call)
		a.kid(macroScan(x.Caller))
	case *parse.FilterBlockStmt:
		a.reads(x.Filters)
		a.kid(frameScan{key: x, pre: x.Filters, body: x.Body})
	case *parse.AutoescapeStmt:
		a.kid(frameScan{key: x, body: x.Body})
	case *parse.BlockStmt:
		a.kid(frameScan{key: x, body: x.Body, alone: true})
	case *parse.ImportStmt:
		a.set(x.As, inIf)
	case *parse.FromImportStmt:
		for _, n := range x.Names {
			a.set(n.As, inIf)
		}
	default:
		a.reads(s) // an include's values, pongo2's statements: every name in them a mention
	}
}

// macroScan is the frame of a macro's (or a caller's) body.
func macroScan(d *parse.MacroDef) frameScan {
	params := append(append([]string(nil), d.Params...), "varargs", "kwargs", "caller")
	return frameScan{key: d, params: params, pre: d.Defaults, body: d.Body}
}

// reads notes every name x reads as mentioned.
func (a *frameNames) reads(x any) { names(x, a.seen) }

// names adds to into the names x reads (its NameExprs).
func names(x any, into map[string]bool) {
	walkTree(reflect.ValueOf(x), func(v reflect.Value) bool {
		if v.Kind() != reflect.Pointer {
			return true
		}
		if n, ok := v.Interface().(*parse.NameExpr); ok {
			into[n.Name] = true
		}
		return true
	})
}

func (a *frameNames) target(t parse.Target, inIf bool) {
	if t.Attr != "" {
		a.seen[t.Name] = true // set ns.attr reads ns
		return
	}
	if t.Name != "" {
		a.set(t.Name, inIf)
	}
	for _, it := range t.Items {
		a.target(it, inIf)
	}
}

func (a *frameNames) set(n string, inIf bool) {
	if a.seen[n] {
		return
	}
	a.seen[n] = true
	if !inIf && a.kidReads[n] {
		a.unset = append(a.unset, n)
	}
}

// unsetIn are the names the body of node, of the template t, starts undefined.
func unsetIn(t *Template, node any) []string {
	if t == nil || len(t.scopes.in) == 0 {
		return nil
	}
	return t.scopes.in[node]
}

// bindUnset binds in f, as not set yet, each of names (those f's body sets before any
// mention: scanScopes) that f does not bind already (a loop's targets; an include's values;
// the names a child template set, for the template it extends).
func bindUnset(f *frame, names []string) {
	for _, n := range names {
		if !f.binds(n) {
			f.names, f.vals = append(f.names, n), append(f.vals, unsetName{})
		}
	}
}

// binds says whether f binds n itself.
func (f *frame) binds(n string) bool {
	for _, m := range f.names {
		if m == n {
			return true
		}
	}
	return false
}

// noneSet says whether f binds no name but the ones its template has not set yet.
func (f *frame) noneSet() bool {
	for _, v := range f.vals {
		if _, ok := v.(unsetName); !ok {
			return false
		}
	}
	return true
}

// unsetFound is what the lookup of a name from the frame from does when it finds the name
// unset (unsetName) in the frame at: undefined (false) when at is from's template's own, its
// top frame or one around from within it; passed over (true, the frames outside at are
// looked at) when from is in another template, or a block, inside it (a top frame between).
func unsetFound(from, at *frame) bool {
	for fr := from; fr != at; fr = fr.parent {
		if fr.top {
			return true
		}
	}
	return false
}
