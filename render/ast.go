package render

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// node is a compiled expression. Evaluation reads the pongo2 execution context (Private first:
// loop variables and {% set %}; then Public: the render context) and never writes to it.
type node interface {
	eval(c *pongo2.ExecutionContext) (any, error)
	pos() int // byte offset in the template source, for errors
}

// exprError is an error at a byte offset of the template source.
type exprError struct {
	at  int
	err error
}

func (e *exprError) Error() string { return e.err.Error() }
func (e *exprError) Unwrap() error { return e.err }

// at attaches a position to err unless it already has one.
func at(off int, err error) error {
	if err == nil {
		return nil
	}
	var ee *exprError
	if errors.As(err, &ee) {
		return err
	}
	var te *templateError
	if errors.As(err, &te) {
		return err
	}
	if isLoopControl(err) {
		return err
	}
	return &exprError{at: off, err: err}
}

type constNode struct {
	at int
	v  any
}

func (n *constNode) eval(*pongo2.ExecutionContext) (any, error) { return n.v, nil }
func (n *constNode) pos() int                                   { return n.at }

type nameNode struct {
	at   int
	name string
}

func (n *nameNode) pos() int { return n.at }

func (n *nameNode) eval(c *pongo2.ExecutionContext) (any, error) {
	if v, ok := c.Private[n.name]; ok {
		return unwrap(v), nil
	}
	if v, ok := c.Public[n.name]; ok {
		return unwrap(v), nil
	}
	if b, ok := builtinFuncs[n.name]; ok {
		return b, nil
	}
	return nil, nil
}

type attrNode struct {
	at   int
	obj  node
	name string
}

func (n *attrNode) pos() int { return n.at }

func (n *attrNode) eval(c *pongo2.ExecutionContext) (any, error) {
	o, err := n.obj.eval(c)
	if err != nil {
		return nil, err
	}
	v, err := getAttr(o, n.name)
	return v, at(n.at, err)
}

// getAttr is Jinja2's obj.name: a dict key, a loop attribute, a namespace attribute, or an
// exported field of a Go struct. Missing is undefined (nil), like pongo2 and Jinja2.
func getAttr(obj any, name string) (any, error) {
	switch o := obj.(type) {
	case map[string]any:
		return o[name], nil
	case map[string]string:
		if v, ok := o[name]; ok {
			return v, nil
		}
		return nil, nil
	case *record.Record:
		v, _ := o.Get(name)
		return v, nil
	case nil, unsetPassword, string, int64, bool, float64, []any, tuple:
		return nil, nil
	case *LoopInfo:
		return o.attr(name)
	case *namespace:
		return o.m[name], nil
	}
	rv := reflect.ValueOf(obj)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		return mapGet(obj, name), nil
	case reflect.Struct:
		f := rv.FieldByName(name)
		if !f.IsValid() && name != "" {
			f = rv.FieldByName(string(unicode.ToUpper(rune(name[0]))) + name[1:])
		}
		if f.IsValid() && f.CanInterface() {
			return unwrap(f.Interface()), nil
		}
	}
	return nil, nil
}

type itemNode struct {
	at       int
	obj, key node
}

func (n *itemNode) pos() int { return n.at }

func (n *itemNode) eval(c *pongo2.ExecutionContext) (any, error) {
	o, err := n.obj.eval(c)
	if err != nil {
		return nil, err
	}
	k, err := n.key.eval(c)
	if err != nil {
		return nil, err
	}
	v, err := getItem(o, k)
	return v, at(n.at, err)
}

// getItem is obj[key]. An index out of range or a missing key is undefined (nil).
func getItem(obj, key any) (any, error) {
	if obj == nil {
		return nil, nil
	}
	if s, ok := key.(string); ok {
		switch obj.(type) {
		case *LoopInfo, *namespace:
			return getAttr(obj, s)
		}
		if isMap(obj) {
			return mapGet(obj, s), nil
		}
	}
	if isMap(obj) {
		return mapGet(obj, key), nil
	}
	i, _, isInt, ok := number(key)
	if !ok || !isInt {
		return nil, fmt.Errorf("cannot index %s with %s", aType(obj), typeName(key))
	}
	switch o := obj.(type) {
	case string:
		r := []rune(o)
		if i < 0 {
			i += int64(len(r))
		}
		if i < 0 || i >= int64(len(r)) {
			return nil, nil
		}
		return string(r[i]), nil
	case []any:
		return indexList(o, i), nil
	case tuple:
		return indexList(o, i), nil
	case []string:
		if i < 0 {
			i += int64(len(o))
		}
		if i < 0 || i >= int64(len(o)) {
			return nil, nil
		}
		return o[i], nil
	}
	l, ok := asList(obj)
	if !ok {
		return nil, fmt.Errorf("%s cannot be indexed", aType(obj))
	}
	return indexList(l, i), nil
}

func indexList(l []any, i int64) any {
	if i < 0 {
		i += int64(len(l))
	}
	if i < 0 || i >= int64(len(l)) {
		return nil
	}
	return l[i]
}

type sliceNode struct {
	at                int
	obj, lo, hi, step node
}

func (n *sliceNode) pos() int { return n.at }

func (n *sliceNode) eval(c *pongo2.ExecutionContext) (any, error) {
	o, err := n.obj.eval(c)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, b := range []node{n.lo, n.hi, n.step} {
		if b == nil {
			continue
		}
		v, err := b.eval(c)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		x, ok := toInt(v)
		if !ok {
			return nil, at(b.pos(), fmt.Errorf("slice indices must be integers, not %s", aType(v)))
		}
		bounds[i] = &x
	}
	v, err := sliceValue(o, bounds[0], bounds[1], bounds[2])
	return v, at(n.at, err)
}

// sliceValue is Python's obj[lo:hi:step].
func sliceValue(obj any, lo, hi, step *int64) (any, error) {
	if obj == nil {
		return nil, nil
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
	var list []any
	s, isStr := obj.(string)
	if isStr {
		runes = []rune(s)
		n = int64(len(runes))
	} else {
		l, ok := asList(obj)
		if !ok {
			return nil, fmt.Errorf("%s cannot be sliced", aType(obj))
		}
		list = l
		n = int64(len(l))
	}
	norm := func(p *int64, def int64, lower, upper int64) int64 {
		if p == nil {
			return def
		}
		x := *p
		if x < 0 {
			x += n
		}
		return max(lower, min(x, upper))
	}
	var start, stop int64
	if st > 0 {
		start, stop = norm(lo, 0, 0, n), norm(hi, n, 0, n)
	} else {
		start, stop = norm(lo, n-1, -1, n-1), norm(hi, -1, -1, n-1)
		if hi != nil && *hi < 0 && *hi+n < 0 {
			stop = -1
		}
	}
	if isStr {
		if st == 1 {
			if start >= stop {
				return "", nil
			}
			return string(runes[start:stop]), nil
		}
		var b strings.Builder
		for i := start; (st > 0 && i < stop) || (st < 0 && i > stop); i += st {
			b.WriteRune(runes[i])
		}
		return b.String(), nil
	}
	out := []any{}
	for i := start; (st > 0 && i < stop) || (st < 0 && i > stop); i += st {
		out = append(out, list[i])
	}
	if _, ok := obj.(tuple); ok {
		return tuple(out), nil
	}
	return out, nil
}

type callNode struct {
	at int
	fn node
	callArgs
}

func (n *callNode) pos() int { return n.at }

func (n *callNode) eval(c *pongo2.ExecutionContext) (any, error) {
	if a, ok := n.fn.(*attrNode); ok {
		obj, err := a.obj.eval(c)
		if err != nil {
			return nil, err
		}
		args, kw, err := evalArgs(c, &n.callArgs)
		if err != nil {
			return nil, err
		}
		v, handled, err := callMethod(obj, a.name, args, kw)
		if handled {
			return v, at(a.at, err)
		}
		callee, err := getAttr(obj, a.name)
		if err != nil {
			return nil, at(a.at, err)
		}
		if callee == nil {
			if obj == nil {
				return nil, at(a.obj.pos(), fmt.Errorf("%s is undefined, so %s.%s() cannot be called", describe(a.obj), describe(a.obj), a.name))
			}
			return nil, at(a.at, fmt.Errorf("%s (%s) has no method %s()", describe(a.obj), aType(obj), a.name))
		}
		v, err = callValue(c, callee, args, kw)
		return v, at(n.at, err)
	}
	callee, err := n.fn.eval(c)
	if err != nil {
		return nil, err
	}
	if callee == nil {
		return nil, at(n.fn.pos(), fmt.Errorf("%s is undefined, it cannot be called", describe(n.fn)))
	}
	args, kw, err := evalArgs(c, &n.callArgs)
	if err != nil {
		return nil, err
	}
	v, err := callValue(c, callee, args, kw)
	return v, at(n.at, err)
}

func evalArgs(c *pongo2.ExecutionContext, ca *callArgs) ([]any, map[string]any, error) {
	var args []any
	if len(ca.args) > 0 {
		args = make([]any, len(ca.args))
		for i, a := range ca.args {
			v, err := a.eval(c)
			if err != nil {
				return nil, nil, err
			}
			args[i] = v
		}
	}
	var kw map[string]any
	if len(ca.kwVals) > 0 {
		kw = make(map[string]any, len(ca.kwVals))
		for i, a := range ca.kwVals {
			v, err := a.eval(c)
			if err != nil {
				return nil, nil, err
			}
			kw[ca.kwNames[i]] = v
		}
	}
	return args, kw, nil
}

// builtinFunc is a global function: range(), dict(), namespace().
type builtinFunc struct {
	name string
	fn   func(args []any, kw map[string]any) (any, error)
}

func callValue(c *pongo2.ExecutionContext, callee any, args []any, kw map[string]any) (any, error) {
	switch f := callee.(type) {
	case *builtinFunc:
		return f.fn(args, kw)
	case *macro:
		return f.call(c, args, kw)
	case func(...*pongo2.Value) (*pongo2.Value, error):
		if len(kw) > 0 {
			return nil, errors.New("keyword arguments are not supported for this function")
		}
		pv := make([]*pongo2.Value, len(args))
		for i, a := range args {
			pv[i] = pongo2.AsValue(a)
		}
		r, err := f(pv...)
		if err != nil {
			return nil, err
		}
		return unwrap(r), nil
	}
	return nil, fmt.Errorf("%s is not callable", aType(callee))
}

// startPos is where the source text of n starts (pos() is its operator or name).
func startPos(n node) int {
	switch x := n.(type) {
	case *attrNode:
		return startPos(x.obj)
	case *itemNode:
		return startPos(x.obj)
	case *sliceNode:
		return startPos(x.obj)
	case *callNode:
		return startPos(x.fn)
	case *filterNode:
		if x.in != nil {
			return startPos(x.in)
		}
	case *testNode:
		return startPos(x.in)
	case *binNode:
		return startPos(x.a)
	case *cmpNode:
		return startPos(x.first)
	case *andNode:
		return startPos(x.a)
	case *orNode:
		return startPos(x.a)
	case *condNode:
		return startPos(x.a)
	}
	return n.pos()
}

// describe renders a node back as source-like text for messages (name.attr[...]).
func describe(n node) string {
	switch x := n.(type) {
	case *nameNode:
		return x.name
	case *attrNode:
		return describe(x.obj) + "." + x.name
	case *itemNode:
		return describe(x.obj) + "[...]"
	case *callNode:
		return describe(x.fn) + "()"
	case *constNode:
		s, _ := repr(x.v)
		return s
	case *filterNode:
		return describe(x.in) + "|" + x.name
	}
	return "the expression"
}

type filterNode struct {
	at    int
	in    node
	name  string
	pongo bool // name:arg form: pongo2 semantics (default replaces any false value)
	fn    filterFunc
	callArgs
}

func (n *filterNode) pos() int { return n.at }

func (n *filterNode) eval(c *pongo2.ExecutionContext) (any, error) {
	in, err := n.in.eval(c)
	if err != nil {
		return nil, err
	}
	return n.apply(c, in)
}

func (n *filterNode) apply(c *pongo2.ExecutionContext, in any) (any, error) {
	args, kw, err := evalArgs(c, &n.callArgs)
	if err != nil {
		return nil, err
	}
	v, err := n.fn(&filterCall{name: n.name, pongo: n.pongo, c: c}, in, args, kw)
	if err != nil {
		return nil, at(n.at, fmt.Errorf("filter %s: %w", n.name, err))
	}
	return v, nil
}

type testNode struct {
	at     int
	in     node
	name   string
	negate bool
	fn     testFunc
	args   []node
}

func (n *testNode) pos() int { return n.at }

func (n *testNode) eval(c *pongo2.ExecutionContext) (any, error) {
	in, err := n.in.eval(c)
	if err != nil {
		return nil, err
	}
	args := make([]any, len(n.args))
	for i, a := range n.args {
		if args[i], err = a.eval(c); err != nil {
			return nil, err
		}
	}
	r, err := n.fn(in, args)
	if err != nil {
		return nil, at(n.at, fmt.Errorf("test %s: %w", n.name, err))
	}
	return r != n.negate, nil
}

type notNode struct {
	at int
	x  node
}

func (n *notNode) pos() int { return n.at }

func (n *notNode) eval(c *pongo2.ExecutionContext) (any, error) {
	v, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	return !truthy(v), nil
}

type negNode struct {
	at   int
	x    node
	plus bool
}

func (n *negNode) pos() int { return n.at }

func (n *negNode) eval(c *pongo2.ExecutionContext) (any, error) {
	v, err := n.x.eval(c)
	if err != nil {
		return nil, err
	}
	i, f, isInt, ok := number(v)
	if !ok {
		return nil, at(n.at, fmt.Errorf("bad operand for unary minus: %s", typeName(v)))
	}
	if n.plus {
		if isInt {
			return i, nil
		}
		return f, nil
	}
	if isInt {
		return -i, nil
	}
	return -f, nil
}

type andNode struct {
	at   int
	a, b node
}

func (n *andNode) pos() int { return n.at }

// eval is Python's `a and b`: a if a is false, else b.
func (n *andNode) eval(c *pongo2.ExecutionContext) (any, error) {
	a, err := n.a.eval(c)
	if err != nil || !truthy(a) {
		return a, err
	}
	return n.b.eval(c)
}

type orNode struct {
	at   int
	a, b node
}

func (n *orNode) pos() int { return n.at }

// eval is Python's `a or b`: a if a is true, else b.
func (n *orNode) eval(c *pongo2.ExecutionContext) (any, error) {
	a, err := n.a.eval(c)
	if err != nil || truthy(a) {
		return a, err
	}
	return n.b.eval(c)
}

type condNode struct {
	at         int
	cond, a, b node
}

func (n *condNode) pos() int { return n.at }

func (n *condNode) eval(c *pongo2.ExecutionContext) (any, error) {
	v, err := n.cond.eval(c)
	if err != nil {
		return nil, err
	}
	if truthy(v) {
		return n.a.eval(c)
	}
	if n.b == nil {
		return nil, nil
	}
	return n.b.eval(c)
}

type listNode struct {
	at    int
	items []node
	tuple bool
}

func (n *listNode) pos() int { return n.at }

func (n *listNode) eval(c *pongo2.ExecutionContext) (any, error) {
	out := make([]any, len(n.items))
	for i, it := range n.items {
		v, err := it.eval(c)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	if n.tuple {
		return tuple(out), nil
	}
	return out, nil
}

type dictNode struct {
	at         int
	keys, vals []node
}

func (n *dictNode) pos() int { return n.at }

func (n *dictNode) eval(c *pongo2.ExecutionContext) (any, error) {
	out := make(map[string]any, len(n.keys))
	for i := range n.keys {
		k, err := n.keys[i].eval(c)
		if err != nil {
			return nil, err
		}
		ks, err := toStr(k)
		if err != nil {
			return nil, at(n.keys[i].pos(), err)
		}
		v, err := n.vals[i].eval(c)
		if err != nil {
			return nil, err
		}
		out[ks] = v
	}
	return out, nil
}

type cmpNode struct {
	at    int
	first node
	ops   []string
	rest  []node
}

func (n *cmpNode) pos() int { return n.at }

func (n *cmpNode) eval(c *pongo2.ExecutionContext) (any, error) {
	a, err := n.first.eval(c)
	if err != nil {
		return nil, err
	}
	for i, op := range n.ops {
		b, err := n.rest[i].eval(c)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, a, b)
		if err != nil {
			return nil, at(n.rest[i].pos(), err)
		}
		if !ok {
			return false, nil
		}
		a = b
	}
	return true, nil
}

func compareOp(op string, a, b any) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in":
		return contains(b, a)
	case "not in":
		r, err := contains(b, a)
		return !r, err
	}
	if isUndefined(a) || isUndefined(b) {
		return false, fmt.Errorf("cannot compare %s with %s using %s", typeName(a), typeName(b), op)
	}
	r, err := compareStrict(a, b)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return r < 0, nil
	case ">":
		return r > 0, nil
	case "<=":
		return r <= 0, nil
	case ">=":
		return r >= 0, nil
	}
	return false, fmt.Errorf("unknown operator %s", op)
}

type binNode struct {
	at   int
	op   string
	a, b node
}

func (n *binNode) pos() int { return n.at }

func (n *binNode) eval(c *pongo2.ExecutionContext) (any, error) {
	a, err := n.a.eval(c)
	if err != nil {
		return nil, err
	}
	b, err := n.b.eval(c)
	if err != nil {
		return nil, err
	}
	v, err := arith(n.op, a, b)
	return v, at(n.at, err)
}

const maxRepeat = 1 << 24

func arith(op string, a, b any) (any, error) {
	if op == "~" {
		sa, err := toStr(a)
		if err != nil {
			return nil, err
		}
		sb, err := toStr(b)
		if err != nil {
			return nil, err
		}
		return sa + sb, nil
	}
	if op == "%" {
		if s, ok := a.(string); ok {
			return pyFormat(s, b)
		}
	}
	if a == unsetPassword(0) || b == unsetPassword(0) {
		return nil, errStatsPassword
	}
	ai, af, aInt, aok := number(a)
	bi, bf, bInt, bok := number(b)
	if aok && bok {
		bothInt := aInt && bInt
		switch op {
		case "+":
			if bothInt {
				return ai + bi, nil
			}
			return af + bf, nil
		case "-":
			if bothInt {
				return ai - bi, nil
			}
			return af - bf, nil
		case "*":
			if bothInt {
				return ai * bi, nil
			}
			return af * bf, nil
		case "/":
			if bf == 0 {
				return nil, errors.New("division by zero")
			}
			return af / bf, nil
		case "//":
			if bf == 0 {
				return nil, errors.New("division by zero")
			}
			if bothInt {
				q := ai / bi
				if (ai%bi != 0) && ((ai < 0) != (bi < 0)) {
					q--
				}
				return q, nil
			}
			return math.Floor(af / bf), nil
		case "%":
			if bf == 0 {
				return nil, errors.New("modulo by zero")
			}
			if bothInt {
				m := ai % bi
				if m != 0 && ((m < 0) != (bi < 0)) {
					m += bi
				}
				return m, nil
			}
			m := math.Mod(af, bf)
			if m != 0 && ((m < 0) != (bf < 0)) {
				m += bf
			}
			return m, nil
		case "**":
			if bothInt && bi >= 0 {
				r := int64(1)
				for k := int64(0); k < bi; k++ {
					r *= ai
					if k > 64 {
						return math.Pow(af, bf), nil
					}
				}
				return r, nil
			}
			return math.Pow(af, bf), nil
		}
	}
	switch op {
	case "+":
		if sa, ok := a.(string); ok {
			if sb, ok := b.(string); ok {
				return sa + sb, nil
			}
		}
		if isSequence(a) && isSequence(b) {
			la, _ := asList(a)
			lb, _ := asList(b)
			out := make([]any, 0, len(la)+len(lb))
			out = append(append(out, la...), lb...)
			if _, ok := a.(tuple); ok {
				return tuple(out), nil
			}
			return out, nil
		}
	case "*":
		if sa, ok := a.(string); ok && bok && bInt {
			if bi*int64(len(sa)) > maxRepeat {
				return nil, errors.New("string repetition too large")
			}
			return strings.Repeat(sa, int(max(bi, 0))), nil
		}
		if la, ok := asList(a); ok && isSequence(a) && bok && bInt {
			if bi*int64(len(la)) > maxRepeat {
				return nil, errors.New("list repetition too large")
			}
			out := []any{}
			for k := int64(0); k < bi; k++ {
				out = append(out, la...)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
}
