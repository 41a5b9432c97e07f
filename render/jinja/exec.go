package jinja

import (
	"fmt"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Running statements: execAll switches on each statement's type; each kind has its function
// here, except loops (exec_for.go), the statements that reach other templates
// (exec_template.go) and pongo2's tags (exec_pongo2.go).

// execAll runs statements in order, switching on each one's type (here rather than in a
// function of its own: statements run once per item of the data, and a call fewer counts).
func (e *evaluator) execAll(body []stmt, f *frame) error {
	for _, s := range body {
		var err error
		switch s := s.(type) {
		case *textStmt:
			// Text and prints are most statements: their common case here, without a call.
			if !e.suppress && len(e.out)+len(s.text) <= e.maxSize {
				e.out = append(e.out, s.text...)
				continue
			}
			err = e.execText(s, f)
		case *printStmt:
			err = e.execPrint(s, f)
		case *ifStmt:
			err = e.execIf(s, f)
		case *forStmt:
			err = e.execFor(s, f)
		case *setStmt:
			err = e.execSet(s, f)
		case *setBlockStmt:
			err = e.execSetBlock(s, f)
		case *withStmt:
			err = e.execWith(s, f)
		case *macroStmt:
			err = e.execMacro(s, f)
		case *callBlockStmt:
			err = e.execCallBlock(s, f)
		case *filterBlockStmt:
			err = e.execFilterBlock(s, f)
		case *includeStmt:
			err = e.execInclude(s, f)
		case *importStmt:
			err = e.execImport(s, f)
		case *fromImportStmt:
			err = e.execFromImport(s, f)
		case *extendsStmt:
			err = e.execExtends(s, f)
		case *blockStmt:
			err = e.execBlock(s, f)
		case *autoescapeStmt:
			err = e.execAutoescape(s, f)
		case *loopControlStmt:
			err = e.execLoopControl(s, f)
		case *doStmt:
			err = e.execDo(s, f)
		case *cycleStmt:
			err = e.execCycle(s, f)
		case *firstofStmt:
			err = e.execFirstof(s, f)
		case *ifchangedStmt:
			err = e.execIfchanged(s, f)
		case *widthratioStmt:
			err = e.execWidthratio(s, f)
		case *spacelessStmt:
			err = e.execSpaceless(s, f)
		default:
			err = e.at(s.position(), fmt.Errorf("internal error: no evaluation for statement %T", s))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execText(s *textStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	if len(e.out)+len(s.text) > e.maxSize {
		return e.at(s.pos, e.sizeError())
	}
	e.out = append(e.out, s.text...)
	return nil
}

func (e *evaluator) execPrint(s *printStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	var v any
	if n, ok := s.x.(*nameExpr); ok { // most prints print a name
		v = e.nameValue(n, f)
	} else {
		var err error
		if v, err = e.eval(s.x, f); err != nil {
			return err
		}
	}
	if str, ok := v.(string); ok && !e.autoescape && len(e.out)+len(str) <= e.maxSize {
		e.out = append(e.out, str...) // the common case, inline
		return nil
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execIf(s *ifStmt, f *frame) error {
	for i, c := range s.conds {
		ok, err := e.cond(c, f)
		if err != nil {
			return err
		}
		if ok {
			return e.execAll(s.bodies[i], f)
		}
	}
	return e.execAll(s.els, f)
}

// cond evaluates x for its truth only: a missing key or name is false without making an
// Undefined on the way (conditions run once per item of the data: no allocation).
func (e *evaluator) cond(x expr, f *frame) (bool, error) {
	switch c := x.(type) {
	case *attrExpr:
		var obj any
		if n, ok := c.obj.(*nameExpr); ok {
			obj = e.nameValue(n, f)
		} else {
			var err error
			if obj, err = e.eval(c.obj, f); err != nil {
				return false, err
			}
		}
		if !isDictMethod(c.name) {
			switch m := obj.(type) {
			case map[string]any:
				return truthy(m[c.name]), nil
			case *record.Record:
				v, _ := m.Get(c.name)
				return truthy(v), nil
			}
		}
		v, err := e.getAttr(obj, c.name)
		if err != nil {
			return false, e.at(c.pos, err)
		}
		return truthy(v), nil
	case *nameExpr:
		v, ok := e.lookup(f, c.name)
		return ok && truthy(v), nil
	case *notExpr:
		ok, err := e.cond(c.x, f)
		return !ok, err
	case *andExpr:
		ok, err := e.cond(c.a, f)
		if err != nil || !ok {
			return false, err
		}
		return e.cond(c.b, f)
	case *orExpr:
		ok, err := e.cond(c.a, f)
		if err != nil || ok {
			return ok, err
		}
		return e.cond(c.b, f)
	}
	v, err := e.eval(x, f)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func (e *evaluator) execSet(s *setStmt, f *frame) error {
	v, err := e.eval(s.x, f)
	if err != nil {
		return err
	}
	return e.at(s.pos, e.assign(f, s.target, v))
}

func (e *evaluator) assign(f *frame, t target, v any) error {
	switch {
	case t.tuple:
		items, err := e.unpack(v, len(t.items))
		if err != nil {
			return err
		}
		for i, it := range t.items {
			if err := e.assign(f, it, items[i]); err != nil {
				return err
			}
		}
		return nil
	case t.attr != "":
		obj, _ := e.lookup(f, t.name)
		ns, ok := obj.(*Namespace)
		if !ok {
			return fmt.Errorf("cannot set %s.%s: %s is not a namespace() (cannot assign attribute on non-namespace object)", t.name, t.attr, t.name)
		}
		return ns.attrs.set(t.attr, v)
	}
	f.set(t.name, v)
	return nil
}

// unpack splits v into n values (a, b = v).
func (e *evaluator) unpack(v any, n int) ([]any, error) {
	if u, ok := v.(*Undefined); ok && u.err != nil {
		return nil, u.err
	}
	s, err := e.seqOf(v)
	if err != nil {
		return nil, fmt.Errorf("cannot unpack non-iterable %s object", typeName(v))
	}
	if s.n > n {
		return nil, fmt.Errorf("cannot unpack: too many values to unpack (expected %d)", n)
	}
	if s.n < n {
		return nil, fmt.Errorf("cannot unpack: not enough values to unpack (expected %d, got %d)", n, s.n)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = s.at(i)
	}
	return out, nil
}

func (e *evaluator) execSetBlock(s *setBlockStmt, f *frame) error {
	out, err := e.capture(s.body, f)
	if err != nil {
		return err
	}
	var v any = out
	if e.autoescape {
		v = Markup(out)
	}
	if s.filters != nil {
		saved := e.blockIn
		e.blockIn = v
		v, err = e.eval(s.filters, f)
		e.blockIn = saved
		if err != nil {
			return err
		}
	}
	return e.at(s.pos, e.assign(f, s.target, v))
}

func (e *evaluator) execWith(s *withStmt, f *frame) error {
	vals := make([]any, len(s.values))
	for i, x := range s.values {
		v, err := e.eval(x, f)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	inner := e.newFrame(f)
	defer e.release(inner)
	for i, t := range s.targets {
		if err := e.assign(inner, t, vals[i]); err != nil {
			return e.at(s.pos, err)
		}
	}
	return e.execAll(s.body, inner)
}

func (e *evaluator) execMacro(s *macroStmt, f *frame) error {
	keep(f)
	f.set(s.macro.name, &Macro{def: s.macro, closure: f, tmpl: e.cur, escape: e.autoescape})
	return nil
}

func (e *evaluator) execCallBlock(s *callBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	keep(f)
	caller := &Macro{def: s.caller, closure: f, tmpl: e.cur, escape: e.autoescape}
	v, err := e.evalCallWith(s.call, f, caller)
	if err != nil {
		return err
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execFilterBlock(s *filterBlockStmt, f *frame) error {
	if e.suppress {
		return nil
	}
	out, err := e.capture(s.body, f)
	if err != nil {
		return err
	}
	var in any = out
	if e.autoescape {
		in = Markup(out)
	}
	saved := e.blockIn
	e.blockIn = in
	v, err := e.eval(s.filters, f)
	e.blockIn = saved
	if err != nil {
		return err
	}
	return e.at(s.pos, e.print(v))
}

func (e *evaluator) execAutoescape(s *autoescapeStmt, f *frame) error {
	v, err := e.eval(s.on, f)
	if err != nil {
		return err
	}
	saved := e.autoescape
	e.autoescape = truthy(v)
	err = e.execAll(s.body, f)
	e.autoescape = saved
	return err
}

func (e *evaluator) execLoopControl(s *loopControlStmt, f *frame) error {
	if s.brk {
		return errBreak
	}
	return errContinue
}

func (e *evaluator) execDo(s *doStmt, f *frame) error {
	_, err := e.eval(s.x, f)
	return err
}
