package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// Evaluating expressions: eval switches on the expression's type; each kind has its function
// here, except calls (eval_call.go) and the lookups obj.name, obj[key], obj[a:b] (access.go).

// eval evaluates one expression.
func (e *evaluator) eval(x expr, f *frame) (any, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		// Names and attributes are most of what templates evaluate: here, without a call more.
		return e.nameValue(x, f), nil
	case *attrExpr:
		var obj any
		if n, ok := x.obj.(*nameExpr); ok {
			obj = e.nameValue(n, f)
		} else {
			var err error
			if obj, err = e.eval(x.obj, f); err != nil {
				return nil, err
			}
		}
		v, err := e.getAttr(obj, x.name)
		return v, e.at(x.pos, err)
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

// nameValue is the value of a name: a variable, else (evalUndefinedName) self or undefined.
func (e *evaluator) nameValue(x *nameExpr, f *frame) any {
	if v, ok := e.lookup(f, x.name); ok {
		return v
	}
	return e.evalUndefinedName(x)
}

// evalUndefinedName is a name that is not set: self in a template with blocks, else undefined.
func (e *evaluator) evalUndefinedName(x *nameExpr) any {
	if x.name == "self" && e.blocks != nil {
		return &selfRef{}
	}
	return undefinedName(x.name)
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
	fn := e.cur.filters[x.use]
	if fn == nil {
		// No filter has the name: in a branch, Jinja2 fails only when the branch runs.
		return nil, e.at(x.pos, fmt.Errorf("unknown filter '%s'", x.name))
	}
	if u, ok := in.(*Undefined); ok && u.err != nil && x.name != "default" && x.name != "d" {
		return nil, e.at(x.pos, u.err)
	}
	outer := e.taint
	e.taint = ""
	v, err := fn(e, in, list, kw)
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
	fn := e.cur.tests[x.use]
	if fn == nil {
		return nil, e.at(x.pos, fmt.Errorf("unknown test '%s'", x.name))
	}
	ok, err := fn(e, in, list, kw)
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
