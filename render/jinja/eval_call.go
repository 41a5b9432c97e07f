package jinja

import (
	"errors"
	"fmt"
)

// Calls: the arguments of a call, a filter or a test; calling a value (a macro, a global, a
// bound method, loop(...), a joiner, self.block()); macros.

func (e *evaluator) evalArgs(a *args, f *frame, caller *Macro) ([]any, map[string]any, error) {
	if a.consts != nil && caller == nil {
		e.kwOrder = nil
		return a.consts, nil, nil
	}
	var list []any
	if len(a.list) > 0 {
		list = make([]any, 0, len(a.list))
		for _, x := range a.list {
			v, err := e.eval(x, f)
			if err != nil {
				return nil, nil, err
			}
			list = append(list, v)
		}
	}
	if a.star != nil {
		v, err := e.eval(a.star, f)
		if err != nil {
			return nil, nil, err
		}
		items, err := e.iterate(v)
		if err != nil {
			return nil, nil, e.at(a.star.position(), fmt.Errorf("argument after * must be an iterable, not %s", typeName(v)))
		}
		list = append(list, items...)
	}
	var kw map[string]any
	var order []string
	if len(a.kw) > 0 || a.starKw != nil || caller != nil {
		kw = make(map[string]any, len(a.kw)+1)
		order = make([]string, 0, len(a.kw)+1)
	}
	for _, k := range a.kw {
		v, err := e.eval(k.x, f)
		if err != nil {
			return nil, nil, err
		}
		kw[k.name] = v
		order = append(order, k.name)
	}
	if a.starKw != nil {
		v, err := e.eval(a.starKw, f)
		if err != nil {
			return nil, nil, err
		}
		if !isMapping(v) {
			return nil, nil, e.at(a.starKw.position(), fmt.Errorf("argument after ** must be a mapping, not %s", typeName(v)))
		}
		var kerr error
		eachItem(v, func(k, val any) bool {
			s, ok := strValue(k)
			if !ok {
				kerr = errors.New("keywords must be strings")
				return false
			}
			if _, dup := kw[s]; !dup {
				order = append(order, s)
			}
			kw[s] = val
			return true
		})
		if kerr != nil {
			return nil, nil, e.at(a.starKw.position(), kerr)
		}
	}
	if caller != nil {
		kw["caller"] = caller
		order = append(order, "caller")
	}
	e.kwOrder = order
	return list, kw, nil
}

// evalWith calls with caller as the `caller` keyword argument ({% call %}).
func (e *evaluator) evalCallWith(x *callExpr, f *frame, caller *Macro) (any, error) {
	if a, ok := x.fn.(*attrExpr); ok {
		// obj.method(...) without making a bound method first.
		obj, err := e.eval(a.obj, f)
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(*Undefined); ok {
			return nil, e.at(a.pos, u.fail())
		}
		if hasMethod(obj, a.name) && !isMappingWithKeyFirst(obj, a.name) {
			list, kw, err := e.evalArgs(&x.args, f, caller)
			if err != nil {
				return nil, err
			}
			outer := e.taint
			e.taint = ""
			v, err := e.callMethod(obj, a.name, list, kw)
			if err == nil && e.taint != "" {
				v = retaint(v, e.taint)
			}
			e.taint = outer
			return v, e.at(a.pos, err)
		}
		fn, err := e.getAttr(obj, a.name)
		if err != nil {
			return nil, e.at(a.pos, err)
		}
		if u, ok := fn.(*Undefined); ok {
			return nil, e.at(a.pos, u.fail())
		}
		list, kw, err := e.evalArgs(&x.args, f, caller)
		if err != nil {
			return nil, err
		}
		v, err := e.call(fn, list, kw)
		return v, e.at(x.pos, err)
	}
	fn, err := e.eval(x.fn, f)
	if err != nil {
		return nil, err
	}
	if u, ok := fn.(*Undefined); ok {
		return nil, e.at(x.fn.position(), u.fail())
	}
	list, kw, err := e.evalArgs(&x.args, f, caller)
	if err != nil {
		return nil, err
	}
	v, err := e.call(fn, list, kw)
	return v, e.at(x.pos, err)
}

// evalAfter finishes a call of obj.method(...) whose obj is already evaluated.
func (e *evaluator) evalCallAfter(x *callExpr, f *frame, obj any) (any, error) {
	a := x.fn.(*attrExpr)
	if u, ok := obj.(*Undefined); ok {
		return nil, e.at(a.pos, u.fail())
	}
	list, kw, err := e.evalArgs(&x.args, f, nil)
	if err != nil {
		return nil, err
	}
	if hasMethod(obj, a.name) && !isMappingWithKeyFirst(obj, a.name) {
		v, err := e.callMethod(obj, a.name, list, kw)
		return v, e.at(a.pos, err)
	}
	fn, err := e.getAttr(obj, a.name)
	if err != nil {
		return nil, e.at(a.pos, err)
	}
	if u, ok := fn.(*Undefined); ok {
		return nil, e.at(a.pos, u.fail())
	}
	v, err := e.call(fn, list, kw)
	return v, e.at(x.pos, err)
}

// isMappingWithKeyFirst: obj.name where obj is a dict without such a method (its key wins).
func isMappingWithKeyFirst(obj any, name string) bool {
	return isMapping(obj) && !isDictMethod(name)
}

// call calls a callable value.
func (e *evaluator) call(fn any, a []any, kw map[string]any) (any, error) {
	switch c := fn.(type) {
	case *Macro:
		return e.callMacro(c, a, kw)
	case *builtin:
		return c.fn(e, a, kw)
	case *boundMethod:
		outer := e.taint
		e.taint = ""
		v, err := e.callMethod(c.obj, c.name, a, kw)
		if err == nil && e.taint != "" {
			v = retaint(v, e.taint)
		}
		e.taint = outer
		return v, err
	case *loopCtx:
		return c.call(e, a)
	case *joiner:
		if len(a) > 0 || len(kw) > 0 {
			return nil, errors.New("a joiner takes no arguments")
		}
		if !c.used {
			c.used = true
			return "", nil
		}
		return c.sep, nil
	case *blockRef:
		return e.renderBlockValue(c.name, 0, e.root)
	case *Undefined:
		return nil, c.fail()
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
}

// maxCallDepth bounds nested macro calls, includes and recursive loops (Python's own
// recursion limit stops Jinja2 at a few hundred).
const maxCallDepth = 256

// Macro is a macro (or a call block's caller) with the scope it was defined in.
type Macro struct {
	def     *macroDef
	closure *frame
	tmpl    *Template
	escape  bool // autoescape where it was defined (its prints escape or not as written there)
}

func (e *evaluator) callMacro(m *Macro, a []any, kw map[string]any) (any, error) {
	d := m.def
	order := e.kwOrder
	if err := e.tick(); err != nil {
		return nil, err
	}
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > maxCallDepth {
		return nil, fmt.Errorf("macro calls nested more than %d deep (a macro that calls itself without end?)", maxCallDepth)
	}
	callerEscape := e.autoescape
	savedCur, savedSuppress, savedOut := e.cur, e.suppress, e.out
	e.cur, e.suppress, e.out, e.autoescape = m.tmpl, false, nil, m.escape
	defer func() { e.cur, e.suppress, e.out, e.autoescape = savedCur, savedSuppress, savedOut, callerEscape }()

	fr := e.newFrame(m.closure)
	defer e.release(fr)
	foundCaller := false
	for i, p := range d.params {
		if i < len(a) {
			fr.set(p, a[i])
			if p == "caller" {
				foundCaller = true
			}
			continue
		}
		if v, ok := kw[p]; ok {
			delete(kw, p)
			fr.set(p, v)
			if p == "caller" {
				foundCaller = true
			}
			continue
		}
		if di := i - (len(d.params) - len(d.defaults)); di >= 0 {
			v, err := e.eval(d.defaults[di], fr)
			if err != nil {
				return nil, err
			}
			fr.set(p, v)
			continue
		}
		fr.set(p, &Undefined{hint: fmt.Sprintf("parameter %s was not provided", reprString(p)), name: p})
	}
	if d.usesCaller && !foundCaller {
		if c, ok := kw["caller"]; ok {
			delete(kw, "caller")
			fr.set("caller", c)
		} else {
			fr.set("caller", &Undefined{hint: "No caller defined", name: "caller"})
		}
	}
	if d.usesKwargs {
		dict := newDict(len(kw))
		for _, k := range order {
			if v, ok := kw[k]; ok {
				dict.set(k, v)
			}
		}
		fr.set("kwargs", dict)
	} else if len(kw) > 0 {
		if _, ok := kw["caller"]; ok {
			return nil, fmt.Errorf("macro %s was invoked with two values for the special caller argument. This is most likely a bug", reprString(d.name))
		}
		return nil, fmt.Errorf("macro %s takes no keyword argument %s", reprString(d.name), reprString(sortedKeys(kw)[0]))
	}
	if d.usesVarargs {
		var rest Tuple
		if len(a) > len(d.params) {
			rest = append(Tuple{}, a[len(d.params):]...)
		} else {
			rest = Tuple{}
		}
		fr.set("varargs", rest)
	} else if len(a) > len(d.params) {
		return nil, fmt.Errorf("macro %s takes not more than %d argument(s)", reprString(d.name), len(d.params))
	}
	if err := e.execAll(d.body, fr); err != nil {
		return nil, err
	}
	if callerEscape {
		return Markup(e.out), nil
	}
	return string(e.out), nil
}
