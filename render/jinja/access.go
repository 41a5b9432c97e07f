package jinja

import (
	"errors"
	"math/big"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Jinja2's lookups on values: obj.name (getattr), obj[key] (getitem), seq[i] and seq[a:b:c].

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
	case *Namespace, *Macro, *module, *cycler, *rangeVal, *group, *selfRef:
		if v, ok := e.objectAttr(obj, name); ok {
			return v, nil
		}
	case int64, float64, bool, *big.Int:
		if v, ok := numberAttr(o, name); ok {
			return v, nil
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

// objectAttr is an attribute of the engine's own objects (but the loop's): a namespace, a
// macro, an imported module, a cycler, a range, a groupby group, self.
func (e *evaluator) objectAttr(obj any, name string) (any, bool) {
	switch o := obj.(type) {
	case *Namespace:
		return o.attrs.getStr(name)
	case *Macro:
		return macroAttr(o, name)
	case *module:
		return o.vars.getStr(name)
	case *cycler:
		switch name {
		case "current":
			if len(o.items) == 0 {
				return nil, true
			}
			return o.items[o.pos], true
		case "next", "reset":
			return &boundMethod{obj: obj, name: name}, true
		}
	case *rangeVal:
		switch name {
		case "start":
			return o.start, true
		case "stop":
			return o.stop, true
		case "step":
			return o.step, true
		case "count", "index":
			return &boundMethod{obj: obj, name: name}, true
		}
	case *group:
		switch name {
		case "grouper":
			return o.grouper, true
		case "list":
			return o.list, true
		case "count", "index":
			return &boundMethod{obj: Tuple{o.grouper, o.list}, name: name}, true
		}
	case *selfRef:
		if _, ok := e.blocks[name]; ok {
			return &blockRef{name: name}, true
		}
	}
	return nil, false
}

// macroAttr is a macro's attributes: name, arguments, catch_kwargs, catch_varargs, caller.
func macroAttr(m *Macro, name string) (any, bool) {
	switch name {
	case "name":
		return m.def.Name, true
	case "arguments":
		t := make(Tuple, len(m.def.Params))
		for i, p := range m.def.Params {
			t[i] = p
		}
		return t, true
	case "catch_kwargs":
		return m.def.UsesKwargs, true
	case "catch_varargs":
		return m.def.UsesVarargs, true
	case "caller":
		return m.def.UsesCaller, true
	}
	return nil, false
}

// numberAttr is real, imag, numerator and denominator of an int, a float or a bool.
func numberAttr(o any, name string) (any, bool) {
	switch name {
	case "real":
		if b, ok := o.(bool); ok {
			return boolInt(b), true
		}
		return o, true
	case "imag":
		if _, ok := o.(float64); ok {
			return 0.0, true
		}
		return int64(0), true
	case "numerator":
		if _, ok := o.(float64); !ok {
			if b, ok := o.(bool); ok {
				return boolInt(b), true
			}
			return o, true
		}
	case "denominator":
		if _, ok := o.(float64); !ok {
			return int64(1), true
		}
	}
	return nil, false
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
