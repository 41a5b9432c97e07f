package jinja

import (
	"reflect"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// A template's own names, as Jinja2's compiler (idtracking) decides them: a name the
// template's top level sets (set, set block, macro, import, from import) is a local of the
// template from its start. Where its first mention at the top level is a read, the local
// starts as the context's value (the importer's, for a module imported with context): the
// engine's lookup through the frames finds the same. Where it is a set (outside an if), the
// local starts undefined: what reads it before the set runs (a macro defined before and
// called before the set, a loop, with or filter block before it) reads undefined, not the
// context's value. The engine binds such a name in the top frame to unsetName when the
// template starts (runTemplate); the lookup finds it as not set.
//
// Another template's frames are not its locals: an included template, a module imported
// with context, a block (which Jinja2 renders from the context, not the template's locals)
// see the context's value of a name their includer has not set yet. Their frames are
// marked top; a lookup from inside one passes over the unsetName of the frames outside it.
//
// Not followed (the engine reads the frames around, as before): the same rule in the frames
// inside a template (a loop's, macro's, with or filter block's body, a block's), where a name
// the frame sets before reading it starts undefined unless a frame around mentions it; and a
// parent template ({% extends %}) whose name the child set already (Jinja2's parent starts it
// undefined for its own macros and loops, its blocks see the child's).

// unsetName marks, in a template's top frame, a name the template sets later (unsetFirst),
// not set yet.
type unsetName struct{}

// unsetFirst are the names a template's top level sets before any mention of them there,
// outside an if (Jinja2's branches leave a name set only in them the context's). The top
// level is what Jinja2's root frame holds: not the bodies of loops, macros, call, filter, set,
// with, autoescape blocks and blocks, but the expressions they are given where they are
// (a loop's iterable, a with's values, a call's and a filter block's filters).
func unsetFirst(body []parse.Stmt) []string {
	a := topNames{seen: map[string]bool{}}
	a.stmts(body, false)
	return a.unset
}

type topNames struct {
	seen  map[string]bool
	unset []string
}

func (a *topNames) stmts(list []parse.Stmt, inIf bool) {
	for _, s := range list {
		a.stmt(s, inIf)
	}
}

func (a *topNames) stmt(s parse.Stmt, inIf bool) {
	switch x := s.(type) {
	case *parse.TextStmt, *parse.ExtendsStmt, *parse.BlockStmt, *parse.AutoescapeStmt, *parse.LoopControlStmt:
		// Nothing at the top: Jinja2 does not look into blocks and scopes.
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
	case *parse.SetStmt:
		a.reads(x.X)
		a.target(x.Target, inIf)
	case *parse.SetBlockStmt:
		a.target(x.Target, inIf)
	case *parse.WithStmt:
		a.reads(x.Values)
	case *parse.MacroStmt:
		a.set(x.Macro.Name, inIf)
	case *parse.CallBlockStmt:
		a.reads(x.Call)
	case *parse.FilterBlockStmt:
		a.reads(x.Filters)
	case *parse.ImportStmt:
		a.set(x.As, inIf)
	case *parse.FromImportStmt:
		for _, n := range x.Names {
			a.set(n.As, inIf)
		}
	default:
		a.reads(s) // include's values, pongo2's statements: every name in them a mention
	}
}

// reads notes every name x reads as mentioned.
func (a *topNames) reads(x any) {
	walkTree(reflect.ValueOf(x), func(v reflect.Value) bool {
		if v.Kind() != reflect.Pointer {
			return true
		}
		if n, ok := v.Interface().(*parse.NameExpr); ok {
			a.seen[n.Name] = true
		}
		return true
	})
}

func (a *topNames) target(t parse.Target, inIf bool) {
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

func (a *topNames) set(n string, inIf bool) {
	if a.seen[n] {
		return
	}
	a.seen[n] = true
	if !inIf {
		a.unset = append(a.unset, n)
	}
}

// bindUnset binds in root, the top frame t runs in, the names t sets before mentioning them
// (unsetFirst) that nothing bound there already (an include's values; the names a child
// template set, for the template it extends).
func bindUnset(t *Template, root *frame) {
	for _, n := range t.unset {
		if !root.binds(n) {
			root.set(n, unsetName{})
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
