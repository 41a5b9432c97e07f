package jinja

import (
	"errors"
	"fmt"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Calls: the arguments of a call, a filter or a test; calling a value (a macro, a global, a
// bound method, loop(...), a joiner, self.block()); macros.

func (e *evaluator) evalArgs(a *parse.Args, f *frame, caller *Macro) ([]any, map[string]any, error) {
	if a.Consts != nil && caller == nil {
		e.kwOrder = nil
		return a.Consts, nil, nil
	}
	var list []any
	if len(a.List) > 0 {
		if list = e.takeArgs(len(a.List)); list == nil {
			list = make([]any, 0, len(a.List))
		}
		for _, x := range a.List {
			v, err := e.eval(x, f)
			if err != nil {
				return nil, nil, err
			}
			list = append(list, v)
		}
	}
	if a.Star != nil {
		v, err := e.eval(a.Star, f)
		if err != nil {
			return nil, nil, err
		}
		items, err := e.iterate(v)
		if err != nil {
			return nil, nil, e.at(a.Star.Position(), fmt.Errorf("argument after * must be an iterable, not %s", typeName(v)))
		}
		list = append(list, items...)
	}
	var kw map[string]any
	var order []string
	if len(a.Kw) > 0 || a.StarKw != nil || caller != nil {
		if kw = e.kwFree; kw != nil {
			order = e.orderFree[:0]
			e.kwFree, e.orderFree = nil, nil
		} else {
			kw = make(map[string]any, len(a.Kw)+1)
			order = make([]string, 0, len(a.Kw)+1)
		}
	}
	for _, k := range a.Kw {
		v, err := e.eval(k.X, f)
		if err != nil {
			return nil, nil, err
		}
		kw[k.Name] = v
		order = append(order, k.Name)
	}
	if a.StarKw != nil {
		v, err := e.eval(a.StarKw, f)
		if err != nil {
			return nil, nil, err
		}
		if !isMapping(v) {
			return nil, nil, e.at(a.StarKw.Position(), fmt.Errorf("argument after ** must be a mapping, not %s", typeName(v)))
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
			return nil, nil, e.at(a.StarKw.Position(), kerr)
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
func (e *evaluator) evalCallWith(x *parse.CallExpr, f *frame, caller *Macro) (any, error) {
	if a, ok := x.Fn.(*parse.AttrExpr); ok {
		// obj.method(...) without making a bound method first.
		obj, err := e.eval(a.Obj, f)
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(*Undefined); ok {
			return nil, e.at(a.Pos, u.fail())
		}
		var keyed *keyRecorder
		if e.keys != nil && a.Name == "get" {
			keyed = e.keys // a keyed read of the module computed (reuse_keyed.go)?
			keyed.check(e.cur, x.Pos, obj)
		}
		if hasMethod(obj, a.Name) && !isMappingWithKeyFirst(obj, a.Name) {
			var list []any
			var kw map[string]any
			var lazy parse.Expr // get's default, when it is made only if get gives it
			if d, ok := obj.(*Dict); ok && a.Name == "update" && caller == nil && literalUpdate(&x.Args) {
				return nil, e.updateWithLiteral(d, x.Args.List[0].(*parse.DictExpr), f, a.Pos)
			}
			if d, ok := obj.(*Dict); ok && a.Name == "setdefault" && caller == nil && lazyDefault(&x.Args) {
				// d.setdefault(key, {...}) where the default is made of constants (making it
				// can neither fail nor change anything): not made when key is there. The
				// HTTPRoute example's merges make a dict or three per route otherwise.
				key, err := e.eval(x.Args.List[0], f)
				if err != nil {
					return nil, err
				}
				if v, found, err := d.get(key); err == nil && found {
					return v, nil
				}
				def, err := e.eval(x.Args.List[1], f)
				if err != nil {
					return nil, err
				}
				if list = e.takeArgs(2); list == nil {
					list = make([]any, 0, 2)
				}
				list, e.kwOrder = append(list, key, def), nil
			} else if a.Name == "get" && isMapping(obj) && caller == nil && lazyDefault(&x.Args) {
				// m.get(key, []) and the like: the default, made of constants, is made only
				// when get gives it (the backends loop of the HTTPRoute example reads
				// by_service.get(key, []) per backend).
				key, err := e.eval(x.Args.List[0], f)
				if err != nil {
					return nil, err
				}
				if list = e.takeArgs(2); list == nil {
					list = make([]any, 0, 2)
				}
				list, e.kwOrder = append(list, key, notMade{}), nil
				lazy = x.Args.List[1]
			} else if list, kw, err = e.evalArgs(&x.Args, f, caller); err != nil {
				return nil, err
			}
			if keyed != nil {
				keyed.noteAt(e.cur, x.Pos, obj, list, kw, caller != nil)
			}
			outer := e.taint
			e.taint = mark{}
			e.callAt = x
			v, err := e.callMethod(obj, a.Name, list, kw)
			e.callAt = nil
			if _, ok := v.(notMade); ok && err == nil {
				v, err = e.eval(lazy, f)
			}
			if x.Args.Consts == nil || caller != nil {
				e.recycleArgs(obj, list)
			}
			if err == nil && e.taint.any() {
				v = retaint(v, e.taint)
			}
			err = guardSecret(err, e.taint, "method", a.Name)
			e.taint = outer
			return v, e.at(a.Pos, err)
		}
		fn, err := e.getAttr(obj, a.Name)
		if err != nil {
			return nil, e.at(a.Pos, err)
		}
		if u, ok := fn.(*Undefined); ok {
			return nil, e.at(a.Pos, u.fail())
		}
		list, kw, err := e.evalArgs(&x.Args, f, caller)
		if err != nil {
			return nil, err
		}
		v, err := e.call(fn, list, kw)
		return v, e.at(x.Pos, err)
	}
	fn, err := e.eval(x.Fn, f)
	if err != nil {
		return nil, err
	}
	if u, ok := fn.(*Undefined); ok {
		return nil, e.at(x.Fn.Position(), u.fail())
	}
	list, kw, err := e.evalArgs(&x.Args, f, caller)
	if err != nil {
		return nil, err
	}
	order := e.kwOrder
	v, err := e.call(fn, list, kw)
	e.recycleKw(fn, kw, order)
	return v, e.at(x.Pos, err)
}

// recycleArgs keeps the argument list of a method call on a dict or a list for the next call:
// their methods keep the arguments, never the list (d.get(k), l.append(x), d.setdefault(k, v)
// run per item in loops). The list must be the call's own (not the constant arguments).
func (e *evaluator) recycleArgs(obj any, list []any) {
	switch obj.(type) {
	case *Dict, map[string]any, map[string]string, *record.Record, *List:
		if cap(list) > 0 && cap(list) <= 8 && len(e.argsFree) < maxArgsFree {
			clear(list)
			e.argsFree = append(e.argsFree, list[:0])
		}
	}
}

// maxArgsFree is how many argument lists recycleArgs keeps: one per level of method calls
// nested in arguments (l.append(d.get(k, [])) takes two at once).
const maxArgsFree = 4

// takeArgs takes an argument list recycleArgs kept, with room for size arguments (nil when
// none is).
func (e *evaluator) takeArgs(size int) []any {
	n := len(e.argsFree)
	if n == 0 || cap(e.argsFree[n-1]) < size {
		return nil
	}
	list := e.argsFree[n-1]
	e.argsFree[n-1] = nil
	e.argsFree = e.argsFree[:n-1]
	return list
}

// recycleKw keeps the keyword map of a call to dict() or namespace() for the next call:
// they copy what it holds and keep nothing of it (namespace(a=..., b=...) runs in loops, and
// a map per call was a good part of a render's allocations). Other callees may keep theirs
// (a macro's kwargs).
func (e *evaluator) recycleKw(fn any, kw map[string]any, order []string) {
	if kw == nil || len(kw) > 16 || (fn != globalNamespace && fn != globalDict) {
		return
	}
	clear(kw)
	e.kwFree, e.orderFree = kw, order
}

// evalAfter finishes a call of obj.method(...) whose obj is already evaluated.
func (e *evaluator) evalCallAfter(x *parse.CallExpr, f *frame, obj any) (any, error) {
	a := x.Fn.(*parse.AttrExpr)
	if u, ok := obj.(*Undefined); ok {
		return nil, e.at(a.Pos, u.fail())
	}
	list, kw, err := e.evalArgs(&x.Args, f, nil)
	if err != nil {
		return nil, err
	}
	if hasMethod(obj, a.Name) && !isMappingWithKeyFirst(obj, a.Name) {
		v, err := e.callMethod(obj, a.Name, list, kw)
		return v, e.at(a.Pos, err)
	}
	fn, err := e.getAttr(obj, a.Name)
	if err != nil {
		return nil, e.at(a.Pos, err)
	}
	if u, ok := fn.(*Undefined); ok {
		return nil, e.at(a.Pos, u.fail())
	}
	v, err := e.call(fn, list, kw)
	return v, e.at(x.Pos, err)
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
		e.taint = mark{}
		v, err := e.callMethod(c.obj, c.name, a, kw)
		if err == nil && e.taint.any() {
			v = retaint(v, e.taint)
		}
		err = guardSecret(err, e.taint, "method", c.name)
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
	savedCur, savedSuppress := e.cur, e.suppress
	capt := e.startCapture()
	e.cur, e.suppress, e.autoescape = m.tmpl, false, m.escape
	done := false
	defer func() {
		if !done {
			e.endCapture(capt)
		}
		e.cur, e.suppress, e.autoescape = savedCur, savedSuppress, callerEscape
	}()

	fr := e.newFrame(m.closure)
	defer e.release(fr)
	foundCaller := false
	for i, p := range d.Params {
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
		if di := i - (len(d.Params) - len(d.Defaults)); di >= 0 {
			v, err := e.eval(d.Defaults[di], fr)
			if err != nil {
				return nil, err
			}
			fr.set(p, v)
			continue
		}
		fr.set(p, &Undefined{hint: fmt.Sprintf("parameter %s was not provided", reprString(p)), name: p})
	}
	if d.UsesCaller && !foundCaller {
		if c, ok := kw["caller"]; ok {
			delete(kw, "caller")
			fr.set("caller", c)
		} else {
			fr.set("caller", &Undefined{hint: "No caller defined", name: "caller"})
		}
	}
	if d.UsesKwargs {
		dict := newDict(len(kw))
		for _, k := range order {
			if v, ok := kw[k]; ok {
				dict.set(k, v)
			}
		}
		fr.set("kwargs", dict)
	} else if len(kw) > 0 {
		if _, ok := kw["caller"]; ok {
			return nil, fmt.Errorf("macro %s was invoked with two values for the special caller argument. This is most likely a bug", reprString(d.Name))
		}
		return nil, fmt.Errorf("macro %s takes no keyword argument %s", reprString(d.Name), reprString(sortedKeys(kw)[0]))
	}
	if d.UsesVarargs {
		var rest Tuple
		if len(a) > len(d.Params) {
			rest = append(Tuple{}, a[len(d.Params):]...)
		} else {
			rest = Tuple{}
		}
		fr.set("varargs", rest)
	} else if len(a) > len(d.Params) {
		return nil, fmt.Errorf("macro %s takes not more than %d argument(s)", reprString(d.Name), len(d.Params))
	}
	bindUnset(fr, unsetIn(m.tmpl, d))
	if err := e.execAll(d.Body, fr); err != nil {
		return nil, err
	}
	out, secret := e.endCapture(capt)
	done = true
	return textValue(out, secret, callerEscape), nil
}

// notMade stands for a default argument not made yet (lazy in evalCallWith).
type notMade struct{}

// lazyDefault says whether the arguments are (key, default) with a default made of
// constants only: a constant, or a list, tuple or dict of such (dict keys constants).
func lazyDefault(a *parse.Args) bool {
	return len(a.List) == 2 && a.Star == nil && len(a.Kw) == 0 && a.StarKw == nil && a.Consts == nil && constLiteral(a.List[1], 0)
}

func constLiteral(x parse.Expr, depth int) bool {
	if depth > 8 {
		return false
	}
	switch x := x.(type) {
	case *parse.ConstExpr:
		return true
	case *parse.ListExpr:
		return constItems(x.Items, depth)
	case *parse.TupleExpr:
		return constItems(x.Items, depth)
	case *parse.DictExpr:
		for _, k := range x.Keys {
			if _, ok := k.(*parse.ConstExpr); !ok {
				return false
			}
		}
		return constItems(x.Values, depth)
	}
	return false
}

func constItems(items []parse.Expr, depth int) bool {
	for _, it := range items {
		if !constLiteral(it, depth+1) {
			return false
		}
	}
	return true
}

// literalUpdate says whether the arguments are one dict literal: d.update({k: v, ...}).
func literalUpdate(a *parse.Args) bool {
	if len(a.List) != 1 || a.Star != nil || len(a.Kw) != 0 || a.StarKw != nil || a.Consts != nil {
		return false
	}
	_, ok := a.List[0].(*parse.DictExpr)
	return ok
}

// updateWithLiteral is d.update({k: v, ...}) without the dict the literal would make (the
// templates' way to set a key: the HTTPRoute example's merges do it for each route): every
// key and value evaluated first, in order, failing where making the dict would, then set.
func (e *evaluator) updateWithLiteral(d *Dict, x *parse.DictExpr, f *frame, pos int) error {
	var buf [8]any
	pairs := buf[:0]
	for i := range x.Keys {
		k, err := e.eval(x.Keys[i], f)
		if err != nil {
			return err
		}
		v, err := e.eval(x.Values[i], f)
		if err != nil {
			return err
		}
		if _, err := keyOf(k); err != nil {
			return e.at(x.Keys[i].Position(), err)
		}
		pairs = append(pairs, k, v)
	}
	e.kwOrder = nil
	outer := e.taint
	e.taint = mark{}
	var err error
	for i := 0; i < len(pairs) && err == nil; i += 2 {
		err = d.set(pairs[i], pairs[i+1])
	}
	if err == nil {
		err = e.checkItems(d.len())
	}
	err = guardSecret(err, e.taint, "method", "update")
	e.taint = outer
	return e.at(pos, err)
}
