package jinja

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
	"github.com/haproxy-sidecar/haproxy-sidecar/render/jinja/parse"
)

// Evaluating expressions: eval switches on the expression's type; each kind has its function
// here, except calls (eval_call.go) and the lookups obj.name, obj[key], obj[a:b] (access.go).

// eval evaluates one expression.
func (e *evaluator) eval(x parse.Expr, f *frame) (any, error) {
	switch x := x.(type) {
	case *parse.ConstExpr:
		return x.Value, nil
	case *parse.NameExpr:
		// Names and attributes are most of what templates evaluate: here, without a call more.
		return e.nameValue(x, f), nil
	case *parse.AttrExpr:
		var obj any
		if n, ok := x.Obj.(*parse.NameExpr); ok {
			obj = e.nameValue(n, f)
		} else {
			var err error
			if obj, err = e.eval(x.Obj, f); err != nil {
				return nil, err
			}
		}
		v, err := e.getAttr(obj, x.Name)
		return v, e.at(x.Pos, err)
	case *parse.ItemExpr:
		return e.evalItem(x, f)
	case *parse.SliceExpr:
		return e.evalSlice(x, f)
	case *parse.CallExpr:
		return e.evalCallWith(x, f, nil)
	case *parse.FilterExpr:
		return e.evalFilter(x, f)
	case *parse.TestExpr:
		return e.evalTest(x, f)
	case *parse.BinExpr:
		return e.evalBin(x, f)
	case *parse.ConcatExpr:
		return e.evalConcat(x, f)
	case *parse.CompareExpr:
		return e.evalCompare(x, f)
	case *parse.AndExpr:
		return e.evalAnd(x, f)
	case *parse.OrExpr:
		return e.evalOr(x, f)
	case *parse.NotExpr:
		return e.evalNot(x, f)
	case *parse.NegExpr:
		return e.evalNeg(x, f)
	case *parse.CondExpr:
		return e.evalCond(x, f)
	case *parse.ListExpr:
		return e.evalList(x, f)
	case *parse.TupleExpr:
		return e.evalTuple(x, f)
	case *parse.DictExpr:
		return e.evalDict(x, f)
	}
	return nil, e.at(x.Position(), fmt.Errorf("internal error: no evaluation for expression %T", x))
}

// nameValue is the value of a name: a variable, else (evalUndefinedName) self or undefined.
func (e *evaluator) nameValue(x *parse.NameExpr, f *frame) any {
	if v, ok := e.lookup(f, x.Name); ok {
		return v
	}
	return e.evalUndefinedName(x)
}

func (e *evaluator) lookup(f *frame, name string) (any, bool) {
	for fr := f; fr != nil; fr = fr.parent {
		for i := len(fr.names) - 1; i >= 0; i-- {
			// The parser interns names: equal names mostly share their bytes.
			if n := fr.names[i]; len(n) == len(name) && (unsafe.StringData(n) == unsafe.StringData(name) || n == name) {
				v := fr.vals[i]
				if _, unset := v.(unsetName); unset {
					if !unsetFound(f, fr) {
						return nil, false
					}
					break // another template's name, not set yet: the frames outside fr's
				}
				return v, true
			}
		}
		if fr.ctx != nil {
			if v, ok := fr.ctx[name]; ok {
				return fromData(v), true
			}
		}
	}
	if b := lookupBuiltin(name); b != nil {
		return b, true
	}
	return nil, false
}

// evalUndefinedName is a name that is not set: self in a template with blocks, else undefined.
func (e *evaluator) evalUndefinedName(x *parse.NameExpr) any {
	if x.Name == "self" && e.blocks != nil {
		return &selfRef{}
	}
	return undefinedName(x.Name)
}

// dataAttr evaluates obj.name when obj is data (a map or a record) and name no dict method:
// found is false otherwise, and x is to be evaluated as usual; v is nil when the key is
// missing (the Undefined eval would make is falsy, as nil is).
func (e *evaluator) dataAttr(x *parse.AttrExpr, f *frame) (v any, found bool, err error) {
	if isDictMethod(x.Name) {
		return nil, false, nil
	}
	var obj any
	if n, ok := x.Obj.(*parse.NameExpr); ok {
		obj = e.nameValue(n, f)
	} else if obj, err = e.eval(x.Obj, f); err != nil {
		return nil, false, err
	}
	switch m := obj.(type) {
	case map[string]any:
		if v, ok := m[x.Name]; ok {
			return fromData(v), true, nil
		}
		return nil, true, nil
	case *record.Record:
		if v, ok := m.Get(x.Name); ok {
			return fromData(v), true, nil
		}
		return nil, true, nil
	}
	v, err = e.getAttr(obj, x.Name)
	return v, true, e.at(x.Pos, err)
}

// cond evaluates x for its truth only: a missing key or name is false without making an
// Undefined on the way (conditions run once per item of the data: no allocation).
func (e *evaluator) cond(x parse.Expr, f *frame) (bool, error) {
	switch c := x.(type) {
	case *parse.AttrExpr:
		var obj any
		if n, ok := c.Obj.(*parse.NameExpr); ok {
			obj = e.nameValue(n, f)
		} else {
			var err error
			if obj, err = e.eval(c.Obj, f); err != nil {
				return false, err
			}
		}
		if !isDictMethod(c.Name) {
			switch m := obj.(type) {
			case map[string]any:
				return truthy(m[c.Name]), nil
			case *record.Record:
				v, _ := m.Get(c.Name)
				return truthy(v), nil
			}
		}
		v, err := e.getAttr(obj, c.Name)
		if err != nil {
			return false, e.at(c.Pos, err)
		}
		return truthy(v), nil
	case *parse.NameExpr:
		v, ok := e.lookup(f, c.Name)
		return ok && truthy(v), nil
	case *parse.NotExpr:
		ok, err := e.cond(c.X, f)
		return !ok, err
	case *parse.AndExpr:
		ok, err := e.cond(c.A, f)
		if err != nil || !ok {
			return false, err
		}
		return e.cond(c.B, f)
	case *parse.OrExpr:
		ok, err := e.cond(c.A, f)
		if err != nil || ok {
			return ok, err
		}
		return e.cond(c.B, f)
	}
	v, err := e.eval(x, f)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func (e *evaluator) evalItem(x *parse.ItemExpr, f *frame) (any, error) {
	obj, err := e.eval(x.Obj, f)
	if err != nil {
		return nil, err
	}
	key, err := e.eval(x.Key, f)
	if err != nil {
		return nil, err
	}
	v, err := e.getItem(obj, key)
	return v, e.at(x.Pos, err)
}

func (e *evaluator) evalSlice(x *parse.SliceExpr, f *frame) (any, error) {
	obj, err := e.eval(x.Obj, f)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, b := range [3]parse.Expr{x.Lo, x.Hi, x.Step} {
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
			return nil, e.at(b.Position(), fmt.Errorf("slice indices must be integers or None, not %s", typeName(v)))
		}
		bounds[i] = &n
	}
	v, err := e.slice(obj, bounds[0], bounds[1], bounds[2])
	return v, e.at(x.Pos, err)
}

func (e *evaluator) evalFilter(x *parse.FilterExpr, f *frame) (any, error) {
	var in any
	if x.In == nil {
		in = e.blockIn
	} else {
		var err error
		if in, err = e.eval(x.In, f); err != nil {
			return nil, err
		}
	}
	list, kw, err := e.evalArgs(&x.Args, f, nil)
	if err != nil {
		return nil, err
	}
	fn := e.cur.filters[x.Use]
	if fn == nil {
		// No filter has the name: in a branch, Jinja2 fails only when the branch runs.
		return nil, e.at(x.Pos, fmt.Errorf("unknown filter '%s'", x.Name))
	}
	if u, ok := in.(*Undefined); ok && u.err != nil && x.Name != "default" && x.Name != "d" {
		return nil, e.at(x.Pos, u.err)
	}
	outer := e.taint
	e.taint = mark{}
	e.filterAt = x
	v, err := fn(e, in, list, kw)
	e.filterAt = nil
	if err == nil && e.taint.any() {
		m := e.taint
		if x.Name == "safe" {
			m.src = "" // |safe lets data text with newlines through; a secret stays one
		}
		v = retaint(v, m)
	}
	err = guardSecret(err, e.taint, "filter", x.Name)
	e.taint = outer
	if err != nil {
		return nil, e.filterError(x, err)
	}
	return v, nil
}

// filterError locates the error of the filter x, naming the filter unless the error says
// where it is.
func (e *evaluator) filterError(x *parse.FilterExpr, err error) error {
	var le *LimitError
	var ue *UndefinedError
	if errors.As(err, &le) || errors.As(err, &ue) || isPositioned(err) {
		return e.at(x.Pos, err)
	}
	return e.at(x.Pos, fmt.Errorf("filter %s: %w", x.Name, err))
}

func isPositioned(err error) bool {
	var pe *posError
	var te *Error
	return errors.As(err, &pe) || errors.As(err, &te)
}

func (e *evaluator) evalTest(x *parse.TestExpr, f *frame) (any, error) {
	in, err := e.eval(x.In, f)
	if err != nil {
		return nil, err
	}
	list, kw, err := e.evalArgs(&x.Args, f, nil)
	if err != nil {
		return nil, err
	}
	fn := e.cur.tests[x.Use]
	if fn == nil {
		return nil, e.at(x.Pos, fmt.Errorf("unknown test '%s'", x.Name))
	}
	ok, err := fn(e, in, list, kw)
	if err != nil {
		return nil, e.at(x.Pos, err)
	}
	return ok != x.Negate, nil
}

func (e *evaluator) evalBin(x *parse.BinExpr, f *frame) (any, error) {
	a, err := e.eval(x.A, f)
	if err != nil {
		return nil, err
	}
	b, err := e.eval(x.B, f)
	if err != nil {
		return nil, err
	}
	outer := e.taint
	e.taint = mark{}
	v, err := e.arith(x.Op, a, b)
	if err == nil && e.taint.any() {
		v = retaint(v, e.taint)
	}
	err = guardSecret(err, e.taint, "operator", x.Op)
	e.taint = outer
	return v, e.at(x.Pos, err)
}

func (e *evaluator) evalConcat(x *parse.ConcatExpr, f *frame) (any, error) {
	outer := e.taint
	e.taint = mark{}
	defer func() { e.taint = outer }()
	// The parts first, then one string of their length (a chain a ~ b ~ c ~ ... grew its
	// builder part by part).
	var small [8]string
	parts := small[:0]
	n := 0
	for _, it := range x.Items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		s, err := e.str(v)
		if err != nil {
			return nil, e.at(it.Position(), err)
		}
		if n+len(s) > e.maxSize {
			return nil, e.at(x.Pos, e.sizeError())
		}
		n += len(s)
		parts = append(parts, s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range parts {
		b.WriteString(s)
	}
	if e.taint.any() {
		return retaint(b.String(), e.taint), nil
	}
	return b.String(), nil
}

func (e *evaluator) evalCompare(x *parse.CompareExpr, f *frame) (any, error) {
	a, err := e.eval(x.First, f)
	if err != nil {
		return nil, err
	}
	for _, op := range x.Ops {
		b, err := e.eval(op.X, f)
		if err != nil {
			return nil, err
		}
		ok, err := e.compareOp(op.Op, a, b)
		if err != nil {
			return nil, e.at(op.Pos, err)
		}
		if !ok {
			return false, nil
		}
		a = b
	}
	return true, nil
}

func (e *evaluator) evalAnd(x *parse.AndExpr, f *frame) (any, error) {
	a, err := e.eval(x.A, f)
	if err != nil || !truthy(a) {
		return a, err
	}
	return e.eval(x.B, f)
}

func (e *evaluator) evalOr(x *parse.OrExpr, f *frame) (any, error) {
	if c, ok := x.A.(*parse.AttrExpr); ok {
		// obj.key or default, the usual way to read an optional field: a missing key goes
		// to the default without making an Undefined (cond does the same).
		v, found, err := e.dataAttr(c, f)
		switch {
		case err != nil:
			return nil, err
		case found && truthy(v):
			return v, nil
		case found:
			return e.eval(x.B, f)
		}
	}
	a, err := e.eval(x.A, f)
	if err != nil || truthy(a) {
		return a, err
	}
	return e.eval(x.B, f)
}

func (e *evaluator) evalNot(x *parse.NotExpr, f *frame) (any, error) {
	v, err := e.eval(x.X, f)
	if err != nil {
		return nil, err
	}
	return !truthy(v), nil
}

func (e *evaluator) evalNeg(x *parse.NegExpr, f *frame) (any, error) {
	v, err := e.eval(x.X, f)
	if err != nil {
		return nil, err
	}
	r, err := unaryOp(v, x.Neg)
	return r, e.at(x.Pos, err)
}

func (e *evaluator) evalCond(x *parse.CondExpr, f *frame) (any, error) {
	t, err := e.cond(x.Test, f)
	if err != nil {
		return nil, err
	}
	if t {
		return e.eval(x.Then, f)
	}
	if x.Else == nil {
		line, _ := e.cur.lineCol(x.Pos)
		return undefinedHint(fmt.Sprintf("the inline if-expression on line %d evaluated to false and no else section was defined.", line)), nil
	}
	return e.eval(x.Else, f)
}

func (e *evaluator) evalList(x *parse.ListExpr, f *frame) (any, error) {
	l := newList(len(x.Items))
	for i, it := range x.Items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		l.items[i] = v
	}
	return l, nil
}

func (e *evaluator) evalTuple(x *parse.TupleExpr, f *frame) (any, error) {
	items := make(Tuple, len(x.Items))
	for i, it := range x.Items {
		v, err := e.eval(it, f)
		if err != nil {
			return nil, err
		}
		items[i] = v
	}
	return items, nil
}

func (e *evaluator) evalDict(x *parse.DictExpr, f *frame) (any, error) {
	d := newDict(len(x.Keys))
	for i := range x.Keys {
		k, err := e.eval(x.Keys[i], f)
		if err != nil {
			return nil, err
		}
		v, err := e.eval(x.Values[i], f)
		if err != nil {
			return nil, err
		}
		if err := d.set(k, v); err != nil {
			return nil, e.at(x.Keys[i].Position(), err)
		}
	}
	return d, nil
}
