package jinja

import (
	"errors"
	"fmt"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// The statements that reach other templates of the set: extends and block (with super()
// and self), include, import and from ... import.

// template returns the compiled template of key, or the error of using it.
func (e *evaluator) template(key string) (*Template, error) {
	if t, ok := e.prog.templates[key]; ok {
		return t, nil
	}
	if err, ok := e.prog.errs[key]; ok {
		return nil, err
	}
	return nil, e.prog.missing(key)
}

// runTemplate renders t at the top level of root, then the templates it extends.
func (e *evaluator) runTemplate(t *Template, root *frame) error {
	savedCur, savedRoot, savedBlocks, savedExt, savedSuppress := e.cur, e.root, e.blocks, e.extending, e.suppress
	defer func() {
		e.cur, e.root, e.blocks, e.extending, e.suppress = savedCur, savedRoot, savedBlocks, savedExt, savedSuppress
	}()
	e.cur, e.root, e.extending, e.suppress = t, root, nil, false
	e.blocks = nil
	if len(t.tree.Blocks) > 0 || t.tree.Extends {
		e.blocks = map[string][]block{}
		for name, b := range t.tree.Blocks {
			e.blocks[name] = []block{{def: b, tmpl: t}}
		}
	}
	bindUnset(root, t.scopes.top)
	if err := e.execAll(t.tree.Body, root); err != nil {
		return err
	}
	// {% extends %}: the parent renders, with the child's blocks first in the block table.
	for seen := 0; e.extending != nil; seen++ {
		if seen > maxCallDepth {
			return errors.New("templates extend each other in a cycle")
		}
		parent := e.extending
		e.extending, e.suppress = nil, false
		for name, b := range parent.tree.Blocks {
			e.blocks[name] = append(e.blocks[name], block{def: b, tmpl: parent})
		}
		e.cur = parent
		bindUnset(root, parent.scopes.top)
		if err := e.execAll(parent.tree.Body, root); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execExtends(s *parse.ExtendsStmt, f *frame) error {
	if e.extending != nil {
		return e.at(s.Pos, errors.New("extended multiple times"))
	}
	t, err := e.template(s.Key)
	if err != nil {
		return e.at(s.KeyPos, err)
	}
	e.extending, e.suppress = t, true
	return nil
}

func (e *evaluator) execBlock(s *parse.BlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	parent := e.root
	if s.Scoped {
		parent = f
	}
	return e.at(s.Pos, e.renderBlock(s.Name, 0, parent))
}

// renderBlock renders definition idx of block name (0: the most derived).
func (e *evaluator) renderBlock(name string, idx int, parent *frame) error {
	defs := e.blocks[name]
	if idx >= len(defs) {
		return fmt.Errorf("there is no parent block called %s", reprString(name))
	}
	b := defs[idx]
	if b.def.Required && idx == 0 {
		return fmt.Errorf("required block %s not found", reprString(name))
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return fmt.Errorf("blocks nested more than %d deep", maxCallDepth)
	}
	fr := e.newFrame(parent)
	defer e.release(fr)
	fr.top = true // Jinja2 renders a block from the context, not the template's locals
	bindUnset(fr, unsetIn(b.tmpl, b.def))
	fr.set("super", &builtin{name: "super", fn: func(e *evaluator, a []any, kw map[string]any) (any, error) {
		return e.renderBlockValue(name, idx+1, parent) // a scoped block's parent sees its scope
	}})
	saved := e.cur
	e.cur = b.tmpl
	err := e.execAll(b.def.Body, fr)
	e.cur = saved
	return err
}

// renderBlockValue renders a block into a string (super(), self.name()), in the scope parent.
func (e *evaluator) renderBlockValue(name string, idx int, parent *frame) (any, error) {
	savedSuppress := e.suppress
	c := e.startCapture()
	e.suppress = false
	err := e.renderBlock(name, idx, parent)
	out, secret := e.endCapture(c)
	e.suppress = savedSuppress
	if err != nil {
		return nil, err
	}
	return textValue(out, secret, e.autoescape), nil
}

func (e *evaluator) execInclude(s *parse.IncludeStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	t, err := e.template(s.Key)
	if err != nil {
		if s.IgnoreMissing && e.prog.errs[s.Key] == nil {
			return nil
		}
		return e.at(s.KeyPos, err)
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return e.at(s.Pos, fmt.Errorf("includes nested more than %d deep (templates that include each other without end?)", maxCallDepth))
	}
	if err := e.tick(); err != nil {
		return e.at(s.Pos, err)
	}
	root := e.newFrame(nil)
	defer e.release(root)
	root.top = true
	if s.WithContext {
		root.parent = f
	}
	for _, v := range s.Vars {
		val, err := e.eval(v.X, f)
		if err != nil {
			return err
		}
		root.set(v.Name, val)
	}
	// An included template escapes as its own text says (the environment's default: off).
	saved := e.autoescape
	e.autoescape = false
	err = e.runTemplate(t, root)
	e.autoescape = saved
	return err
}

// importModule renders key as a module: its top-level variables and macros.
func (e *evaluator) importModule(key string, keyPos int, withContext bool, f *frame) (*module, error) {
	if !withContext {
		if m, ok := e.modules[key]; ok {
			return m, nil
		}
	}
	t, err := e.template(key)
	if err != nil {
		return nil, e.at(keyPos, err)
	}
	// Imported with context at the top of the main template, before anything was set there:
	// the module sees the render context only, and other renders of it may share it.
	share := withContext && e.shared != nil && f == e.top && f.noneSet() && e.extending == nil
	if share {
		if m := e.shared.get(key, t.tree.Src, e.vars, f, e.cur != nil && e.cur.readOnly, e); m != nil {
			return m, nil
		}
		if e.shared.Across != nil && !e.prog.testsIdentity() {
			if m, kept := e.shared.Across.reuse(e.prog, key, t, e.vars, f, e); m != nil {
				e.shared.putKept(key, t.tree.Src, e.vars, kept)
				return m, nil
			}
		}
	}
	// Imported with context elsewhere (in a loop's body, say): kept per value of what it reads.
	var lr *loopRead
	if withContext && !share && e.shared != nil && e.shared.Across != nil && !e.prog.testsIdentity() {
		var m *module
		if m, lr = e.loopImport(key, t, f); m != nil {
			return m, nil
		}
		e.shared.Across.loopComputed(key)
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return nil, e.at(keyPos, fmt.Errorf("imports nested more than %d deep", maxCallDepth))
	}
	root := &frame{top: true}
	if withContext {
		root.parent = f
	}
	savedEscape := e.autoescape
	c := e.startCapture()
	e.autoescape = false
	outerKeys := e.keys
	if lr != nil {
		e.bodyModules(1) // kept whole: its loops' iterations are not kept too (reuse_body.go)
		e.keys = lr.nestKeys(outerKeys)
		e.computing = append(e.computing, lr)
	}
	err = e.runTemplate(t, root)
	e.keys = outerKeys
	if lr != nil {
		e.bodyModules(-1)
		e.computing = e.computing[:len(e.computing)-1]
	}
	out, secret := e.endCapture(c)
	e.autoescape = savedEscape
	if err != nil {
		return nil, err
	}
	keep(root)
	m := &module{name: key, vars: newDict(len(root.names)), output: out, secret: secret, frame: root}
	for i, n := range root.names {
		if _, unset := root.vals[i].(unsetName); !unset && !strings.HasPrefix(n, "_") {
			m.vars.set(n, root.vals[i])
		}
	}
	if !withContext {
		if e.modules == nil {
			e.modules = map[string]*module{}
		}
		e.modules[key] = m
	}
	if lr != nil {
		le := e.shared.Across.loopKeep(key, lr, m, e)
		lr.run.list = append(lr.run.list, le)
		e.notePart(le)
		e.recycleVals(lr.vals)
	}
	if share {
		var kept *keptModule
		if e.shared.Across != nil && !e.shared.Apart && !e.prog.testsIdentity() {
			kept = e.shared.Across.keep(e.prog, key, t, e.vars, m, e)
		}
		if kept != nil {
			e.shared.putKept(key, t.tree.Src, e.vars, kept)
			if kept.mod == m {
				// Kept as it is (no copy): this import too has a view of it, and the module
				// kept holds nothing of this template's frame.
				v := viewModule(m, f)
				m.frame.parent = nil
				return v, nil
			}
		} else {
			e.shared.put(key, t.tree.Src, e.vars, m)
		}
	}
	return m, nil
}

func (e *evaluator) execImport(s *parse.ImportStmt, f *frame) error {
	m, err := e.importModule(s.Key, s.KeyPos, s.WithContext, f)
	if err != nil {
		return err
	}
	f.set(s.As, m)
	return nil
}

func (e *evaluator) execFromImport(s *parse.FromImportStmt, f *frame) error {
	m, err := e.importModule(s.Key, s.KeyPos, s.WithContext, f)
	if err != nil {
		return err
	}
	for _, n := range s.Names {
		v, ok := m.vars.getStr(n.Name)
		if !ok {
			line, _ := e.cur.lineCol(s.Pos)
			v = undefinedHint(fmt.Sprintf("the template %s (imported on line %d in %s) does not export the requested name %s", reprString(s.Key), line, reprString(e.cur.name), reprString(n.Name)))
		}
		f.set(n.As, v)
	}
	return nil
}
