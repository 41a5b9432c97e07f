package jinja

import (
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// eval evaluates one expression.
func (e *evaluator) eval(x expr, f *frame) (any, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		return e.evalName(x, f)
	case *attrExpr:
		return e.evalAttr(x, f)
	case *itemExpr:
		return e.evalItem(x, f)
	case *sliceExpr:
		return e.evalSlice(x, f)
	case *callExpr:
		return e.evalCallWith(x, f, nil)
	case *filterExpr:
		return e.evalFilter(x, f)
	case *testExpr:
		return e.evalTest(x, f)
	case *binExpr:
		return e.evalBin(x, f)
	case *concatExpr:
		return e.evalConcat(x, f)
	case *compareExpr:
		return e.evalCompare(x, f)
	case *andExpr:
		return e.evalAnd(x, f)
	case *orExpr:
		return e.evalOr(x, f)
	case *notExpr:
		return e.evalNot(x, f)
	case *negExpr:
		return e.evalNeg(x, f)
	case *condExpr:
		return e.evalCond(x, f)
	case *listExpr:
		return e.evalList(x, f)
	case *tupleExpr:
		return e.evalTuple(x, f)
	case *dictExpr:
		return e.evalDict(x, f)
	}
	return nil, e.at(x.position(), fmt.Errorf("internal error: no evaluation for expression %T", x))
}

func (e *evaluator) evalName(x *nameExpr, f *frame) (any, error) {
	if v, ok := e.lookup(f, x.name); ok {
		return v, nil
	}
	if x.name == "self" && e.blocks != nil {
		return &selfRef{}, nil
	}
	return undefinedName(x.name), nil
}

func (e *evaluator) evalAttr(x *attrExpr, f *frame) (any, error) {
	obj, err := e.eval(x.obj, f)
	if err != nil {
		return nil, err
	}
	v, err := e.getAttr(obj, x.name)
	return v, e.at(x.pos, err)
}

func (e *evaluator) evalItem(x *itemExpr, f *frame) (any, error) {
	obj, err := e.eval(x.obj, f)
	if err != nil {
		return nil, err
	}
	key, err := e.eval(x.key, f)
	if err != nil {
		return nil, err
	}
	v, err := e.getItem(obj, key)
	return v, e.at(x.pos, err)
}

// isDictMethod: names a dict's attribute lookup finds before its keys (Python attributes
// come first in Jinja2's getattr), with Python 2's forms the original project's templates use.
func isDictMethod(name string) bool {
	switch name {
	case "items", "keys", "values", "get", "pop", "popitem", "update", "setdefault", "copy", "clear",
		"iteritems", "itervalues", "iterkeys", "has_key":
		return true
	}
	return false
}

// getAttr is Jinja2's obj.name: a Python attribute (a method: d.items, s.upper; a property:
// loop.index), else the item obj["name"], else undefined.
func (e *evaluator) getAttr(obj any, name string) (any, error) {
	switch o := obj.(type) {
	case map[string]any:
		if isDictMethod(name) {
			return &boundMethod{obj: obj, name: name}, nil
		}
		if v, ok := o[name]; ok {
			return fromData(v), nil
		}
		return undefinedAttr(obj, name), nil
	case *record.Record:
		if isDictMethod(name) {
			return &boundMethod{obj: obj, name: name}, nil
		}
		if v, ok := o.Get(name); ok {
			return fromData(v), nil
		}
		return undefinedAttr(obj, name), nil
	case *Dict, map[string]string:
		if isDictMethod(name) {
			return &boundMethod{obj: obj, name: name}, nil
		}
		if v, ok, _ := mapGetStr(obj, name); ok {
			return v, nil
		}
		return undefinedAttr(obj, name), nil
	case *Undefined:
		return nil, o.fail()
	case *loopCtx:
		if v, ok := o.attr(name); ok {
			return v, nil
		}
		if name == "cycle" || name == "changed" {
			return &boundMethod{obj: obj, name: name}, nil
		}
	case *Namespace:
		if v, ok := o.attrs.getStr(name); ok {
			return v, nil
		}
	case *Macro:
		switch name {
		case "name":
			return o.def.name, nil
		case "arguments":
			t := make(Tuple, len(o.def.params))
			for i, p := range o.def.params {
				t[i] = p
			}
			return t, nil
		case "catch_kwargs":
			return o.def.usesKwargs, nil
		case "catch_varargs":
			return o.def.usesVarargs, nil
		case "caller":
			return o.def.usesCaller, nil
		}
	case *module:
		if v, ok := o.vars.getStr(name); ok {
			return v, nil
		}
	case *cycler:
		switch name {
		case "current":
			if len(o.items) == 0 {
				return nil, nil
			}
			return o.items[o.pos], nil
		case "next", "reset":
			return &boundMethod{obj: obj, name: name}, nil
		}
	case *rangeVal:
		switch name {
		case "start":
			return o.start, nil
		case "stop":
			return o.stop, nil
		case "step":
			return o.step, nil
		case "count", "index":
			return &boundMethod{obj: obj, name: name}, nil
		}
	case *group:
		switch name {
		case "grouper":
			return o.grouper, nil
		case "list":
			return o.list, nil
		case "count", "index":
			return &boundMethod{obj: Tuple{o.grouper, o.list}, name: name}, nil
		}
	case *selfRef:
		if _, ok := e.blocks[name]; ok {
			return &blockRef{name: name}, nil
		}
	case int64, float64, bool, *big.Int:
		switch name {
		case "real":
			if b, ok := o.(bool); ok {
				return boolInt(b), nil
			}
			return o, nil
		case "imag":
			if _, ok := o.(float64); ok {
				return 0.0, nil
			}
			return int64(0), nil
		case "numerator":
			if _, ok := o.(float64); !ok {
				if b, ok := o.(bool); ok {
					return boolInt(b), nil
				}
				return o, nil
			}
		case "denominator":
			if _, ok := o.(float64); !ok {
				return int64(1), nil
			}
		}
		if hasMethod(obj, name) {
			return &boundMethod{obj: obj, name: name}, nil
		}
	default:
		if hasMethod(obj, name) {
			return &boundMethod{obj: obj, name: name}, nil
		}
	}
	return undefinedAttr(obj, name), nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// getItem is Jinja2's obj[key]: the item, else (a string key) the attribute, else undefined.
func (e *evaluator) getItem(obj, key any) (any, error) {
	if u, ok := obj.(*Undefined); ok {
		return nil, u.fail()
	}
	if isMapping(obj) {
		v, ok, err := mapGet(obj, key)
		if err != nil {
			return nil, err
		}
		if ok {
			return v, nil
		}
	} else if i, ok := indexOf(key); ok {
		if v, ok := e.index(obj, i); ok {
			return v, nil
		}
		return undefinedAttr(obj, key), nil
	}
	if s, ok := strValue(key); ok {
		return e.getAttr(obj, s)
	}
	return undefinedAttr(obj, key), nil
}

// indexOf reads an index: an int or a bool.
func indexOf(key any) (int64, bool) {
	switch k := key.(type) {
	case int64:
		return k, true
	case bool:
		return boolInt(k), true
	case *big.Int:
		return 1 << 62, true // out of range of anything
	}
	return 0, false
}

// index is seq[i] for sequences (negative i counts from the end).
func (e *evaluator) index(obj any, i int64) (any, bool) {
	n := int64(-1)
	switch o := obj.(type) {
	case string, *tainted, Markup:
		s, _ := strValue(o)
		runes := []rune(s)
		if i < 0 {
			i += int64(len(runes))
		}
		if i < 0 || i >= int64(len(runes)) {
			return nil, false
		}
		c := string(runes[i])
		switch o.(type) {
		case Markup:
			return Markup(c), true
		case *tainted:
			return retaint(c, o.(*tainted).src), true
		}
		return c, true
	case *rangeVal:
		n = o.len()
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return nil, false
		}
		return o.at(i), true
	case *loopCtx, *Namespace, *generator:
		return nil, false
	}
	switch o := obj.(type) {
	case *List:
		n = int64(len(o.items))
	case []any:
		n = int64(len(o))
	case []string:
		n = int64(len(o))
	case []map[string]any:
		n = int64(len(o))
	case Tuple:
		n = int64(len(o))
	case *group:
		return e.index(Tuple{o.grouper, o.list}, i)
	default:
		return nil, false
	}
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return nil, false
	}
	switch o := obj.(type) {
	case *List:
		return o.items[i], true
	case []any:
		return fromData(o[i]), true
	case []string:
		return fromData(o[i]), true
	case []map[string]any:
		return o[i], true
	case Tuple:
		return o[i], true
	}
	return nil, false
}

func (e *evaluator) evalSlice(x *sliceExpr, f *frame) (any, error) {
	obj, err := e.eval(x.obj, f)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, b := range [3]expr{x.lo, x.hi, x.step} {
		if b == nil {
			continue
		}
		v, err := e.eval(b, f)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, ok := indexOf(v)
		if !ok {
			return nil, e.at(b.position(), fmt.Errorf("slice indices must be integers or None, not %s", typeName(v)))
		}
		bounds[i] = &n
	}
	v, err := e.slice(obj, bounds[0], bounds[1], bounds[2])
	return v, e.at(x.pos, err)
}

// slice is Python's obj[lo:hi:step].
func (e *evaluator) slice(obj any, lo, hi, step *int64) (any, error) {
	if u, ok := obj.(*Undefined); ok {
		return nil, u.fail()
	}
	st := int64(1)
	if step != nil {
		st = *step
		if st == 0 {
			return nil, errors.New("slice step cannot be zero")
		}
	}
	var n int64
	var runes []rune
	var items []any
	var rng *rangeVal
	switch o := obj.(type) {
	case string, *tainted, Markup:
		s, _ := strValue(o)
		runes = []rune(s)
		n = int64(len(runes))
	case *rangeVal:
		rng = o
		n = o.len()
	default:
		if !isList(obj) && !isTupleVal(obj) {
			return undefinedAttr(obj, "slice"), nil
		}
		items = listItems(obj)
		n = int64(len(items))
	}
	start, stop := sliceBounds(n, lo, hi, st)
	count := int64(0)
	if st > 0 && stop > start {
		count = (stop - start + st - 1) / st
	} else if st < 0 && start > stop {
		count = (start - stop - st - 1) / -st
	}
	if rng != nil {
		return &rangeVal{start: rng.at(start), stop: rng.at(start) + count*st*rng.step, step: st * rng.step}, nil
	}
	if runes != nil || n == 0 && items == nil {
		var b strings.Builder
		for i, k := int64(0), start; i < count; i, k = i+1, k+st {
			b.WriteRune(runes[k])
		}
		s := b.String()
		switch o := obj.(type) {
		case Markup:
			return Markup(s), nil
		case *tainted:
			return retaint(s, o.src), nil
		}
		return s, nil
	}
	out := make([]any, 0, count)
	for i, k := int64(0), start; i < count; i, k = i+1, k+st {
		out = append(out, items[k])
	}
	if _, ok := obj.(Tuple); ok {
		return Tuple(out), nil
	}
	return &List{items: out}, nil
}

func sliceBounds(n int64, lo, hi *int64, st int64) (int64, int64) {
	norm := func(p *int64, def, lower, upper int64) int64 {
		if p == nil {
			return def
		}
		x := *p
		if x < 0 {
			x += n
			if x < lower {
				x = lower
			}
		}
		if x > upper {
			x = upper
		}
		if x < lower {
			x = lower
		}
		return x
	}
	if st > 0 {
		return norm(lo, 0, 0, n), norm(hi, n, 0, n)
	}
	return norm(lo, n-1, -1, n-1), norm(hi, -1, -1, n-1)
}

// Calls.

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
		return e.renderBlockValue(c.name, 0)
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

func (e *evaluator) evalFilter(x *filterExpr, f *frame) (any, error) {
	var in any
	if x.in == nil {
		in = e.blockIn
	} else {
		var err error
		if in, err = e.eval(x.in, f); err != nil {
			return nil, err
		}
	}
	list, kw, err := e.evalArgs(&x.args, f, nil)
	if err != nil {
		return nil, err
	}
	if u, ok := in.(*Undefined); ok && u.err != nil && x.name != "default" && x.name != "d" {
		return nil, e.at(x.pos, u.err)
	}
	outer := e.taint
	e.taint = ""
	v, err := x.fn(e, in, list, kw)
	if err == nil && e.taint != "" && x.name != "safe" {
		v = retaint(v, e.taint)
	}
	e.taint = outer
	if err != nil {
		var le *LimitError
		var ue *UndefinedError
		if errors.As(err, &le) || errors.As(err, &ue) || isPositioned(err) {
			return nil, e.at(x.pos, err)
		}
		return nil, e.at(x.pos, fmt.Errorf("filter %s: %w", x.name, err))
	}
	return v, nil
}

func isPositioned(err error) bool {
	var pe *posError
	var te *Error
	return errors.As(err, &pe) || errors.As(err, &te)
}

func (e *evaluator) evalTest(x *testExpr, f *frame) (any, error) {
	in, err := e.eval(x.in, f)
	if err != nil {
		return nil, err
	}
	list, kw, err := e.evalArgs(&x.args, f, nil)
	if err != nil {
		return nil, err
	}
	ok, err := x.fn(e, in, list, kw)
	if err != nil {
		return nil, e.at(x.pos, err)
	}
	return ok != x.negate, nil
}

func (e *evaluator) evalBin(x *binExpr, f *frame) (any, error) {
	a, err := e.eval(x.a, f)
	if err != nil {
		return nil, err
	}
	b, err := e.eval(x.b, f)
	if err != nil {
		return nil, err
	}
	outer := e.taint
	e.taint = ""
	v, err := e.arith(x.op, a, b)
	if err == nil && e.taint != "" {
		v = retaint(v, e.taint)
	}
	e.taint = outer
	return v, e.at(x.pos, err)
}

func (e *evaluator) evalConcat(x *concatExpr, f *frame) (any, error) {
	outer := e.taint
	e.taint = ""
	defer func() { e.taint = outer }()
	var b strings.Builder
	for _, it := range x.items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		s, err := e.str(v)
		if err != nil {
			return nil, e.at(it.position(), err)
		}
		if b.Len()+len(s) > e.maxSize {
			return nil, e.at(x.pos, e.sizeError())
		}
		b.WriteString(s)
	}
	if e.taint != "" {
		return retaint(b.String(), e.taint), nil
	}
	return b.String(), nil
}

func (e *evaluator) evalCompare(x *compareExpr, f *frame) (any, error) {
	a, err := e.eval(x.first, f)
	if err != nil {
		return nil, err
	}
	for _, op := range x.ops {
		b, err := e.eval(op.x, f)
		if err != nil {
			return nil, err
		}
		ok, err := e.compareOp(op.op, a, b)
		if err != nil {
			return nil, e.at(op.pos, err)
		}
		if !ok {
			return false, nil
		}
		a = b
	}
	return true, nil
}

func (e *evaluator) compareOp(op string, a, b any) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in":
		return e.contains(b, a)
	case "notin":
		ok, err := e.contains(b, a)
		return !ok, err
	}
	c, err := compare(a, b, op)
	if err != nil {
		return false, err
	}
	if c == 2 { // NaN
		return false, nil
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("unknown comparison %s", op)
}

func (e *evaluator) evalAnd(x *andExpr, f *frame) (any, error) {
	a, err := e.eval(x.a, f)
	if err != nil || !truthy(a) {
		return a, err
	}
	return e.eval(x.b, f)
}

func (e *evaluator) evalOr(x *orExpr, f *frame) (any, error) {
	a, err := e.eval(x.a, f)
	if err != nil || truthy(a) {
		return a, err
	}
	return e.eval(x.b, f)
}

func (e *evaluator) evalNot(x *notExpr, f *frame) (any, error) {
	v, err := e.eval(x.x, f)
	if err != nil {
		return nil, err
	}
	return !truthy(v), nil
}

func (e *evaluator) evalNeg(x *negExpr, f *frame) (any, error) {
	v, err := e.eval(x.x, f)
	if err != nil {
		return nil, err
	}
	r, err := neg(v, x.neg)
	return r, e.at(x.pos, err)
}

func (e *evaluator) evalCond(x *condExpr, f *frame) (any, error) {
	t, err := e.cond(x.test, f)
	if err != nil {
		return nil, err
	}
	if t {
		return e.eval(x.then, f)
	}
	if x.els == nil {
		line, _ := e.cur.lineCol(x.pos)
		return undefinedHint(fmt.Sprintf("the inline if-expression on line %d evaluated to false and no else section was defined.", line)), nil
	}
	return e.eval(x.els, f)
}

func (e *evaluator) evalList(x *listExpr, f *frame) (any, error) {
	items := make([]any, len(x.items))
	for i, it := range x.items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return &List{items: items}, nil
}

func (e *evaluator) evalTuple(x *tupleExpr, f *frame) (any, error) {
	items := make(Tuple, len(x.items))
	for i, it := range x.items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return items, nil
}

func (e *evaluator) evalDict(x *dictExpr, f *frame) (any, error) {
	d := newDict(len(x.keys))
	for i := range x.keys {
		k, err := e.eval(x.keys[i], f)
		if err != nil {
			return nil, err
		}
		v, err := e.eval(x.vals[i], f)
		if err != nil {
			return nil, err
		}
		if err := d.set(k, v); err != nil {
			return nil, e.at(x.keys[i].position(), err)
		}
	}
	return d, nil
}
