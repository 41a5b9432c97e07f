package jinja

import (
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Jinja2's lookups on values: obj.name (getattr), obj[key] (getitem), seq[i] and seq[a:b:c];
// which names are methods of which value (the methods themselves are in methods*.go); and
// attribute paths ("a.b.0", as map, sort, groupby... take them).

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
		if o.lf != nil {
			if err := o.lf.settle(e, name, o.index0); err != nil {
				return nil, err
			}
		}
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

// attr returns a loop attribute.
func (l *loopCtx) attr(name string) (any, bool) {
	if l.s.live != nil {
		l.length = l.s.count()
	}
	if l.lf != nil {
		if v, ok := l.lazyAttr(name); ok {
			return v, true
		}
	}
	switch name {
	case "index", "Counter":
		return int64(l.index0 + 1), true
	case "index0", "Counter0":
		return int64(l.index0), true
	case "revindex", "Revcounter":
		return int64(l.length - l.index0), true
	case "revindex0", "Revcounter0":
		return int64(l.length - l.index0 - 1), true
	case "first", "First":
		return l.index0 == 0, true
	case "last", "Last":
		return l.index0 == l.length-1, true
	case "length":
		return int64(l.length), true
	case "depth":
		return int64(l.depth0 + 1), true
	case "depth0":
		return int64(l.depth0), true
	case "previtem":
		if l.index0 == 0 {
			return undefinedHint("there is no previous item"), true
		}
		return l.s.at(l.index0 - 1), true
	case "nextitem":
		if l.index0 >= l.length-1 {
			return undefinedHint("there is no next item"), true
		}
		return l.s.at(l.index0 + 1), true
	case "Parentloop":
		if l.parent == nil {
			return undefinedAttr(l, name), true
		}
		return l.parent, true
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
		v, err := e.getAttr(obj, s)
		if t, secret := key.(*tainted); secret && t.secret {
			if _, missing := v.(*Undefined); missing {
				v = undefinedAttr(obj, key) // says it without quoting the secret
			}
		}
		return v, err
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
			return retaint(c, o.(*tainted).mark()), true
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
	var items []any // of a list, the window from base only (listWindow)
	var list bool
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
		list, n = true, int64(listLen(obj))
	}
	start, stop := sliceBounds(n, lo, hi, st)
	base := max(min(start, stop), 0) // the index of items[0]
	if list {
		items = listWindow(obj, base, max(start, stop))
	}
	count := int64(0)
	if st > 0 && stop > start {
		count = (stop - start + st - 1) / st
	} else if st < 0 && start > stop {
		count = (start - stop - st - 1) / -st
	}
	if rng != nil {
		return &rangeVal{start: rng.at(start), stop: rng.at(start) + count*st*rng.step, step: st * rng.step}, nil
	}
	if !list {
		var b strings.Builder
		for i, k := int64(0), start; i < count; i, k = i+1, k+st {
			b.WriteRune(runes[k])
		}
		s := b.String()
		switch o := obj.(type) {
		case Markup:
			return Markup(s), nil
		case *tainted:
			return retaint(s, o.mark()), nil
		}
		return s, nil
	}
	out := make([]any, 0, count)
	for i, k := int64(0), start; i < count; i, k = i+1, k+st {
		out = append(out, items[k-base])
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

// hasMethod reports whether obj has a method called name.
func hasMethod(obj any, name string) bool {
	switch obj.(type) {
	case string, *tainted:
		return isStrMethod(name)
	case Markup:
		return isStrMethod(name) || name == "striptags" || name == "unescape" || name == "escape"
	case *List, []any, []string, []map[string]any:
		return isListMethod(name)
	case Tuple:
		return name == "count" || name == "index"
	case *Dict, map[string]any, map[string]string, *record.Record:
		return isDictMethod(name)
	case int64, *big.Int, bool:
		return name == "bit_length" || name == "conjugate" || name == "is_integer"
	case float64:
		return name == "is_integer" || name == "conjugate"
	case *rangeVal:
		return name == "count" || name == "index"
	case *loopCtx:
		return name == "cycle" || name == "changed"
	case *cycler:
		return name == "next" || name == "reset"
	}
	return false
}

func isStrMethod(name string) bool {
	switch name {
	case "capitalize", "casefold", "center", "count", "endswith", "find", "format", "format_map", "index",
		"isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
		"isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "partition",
		"removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
		"rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill", "expandtabs":
		return true
	}
	return false
}

func isListMethod(name string) bool {
	switch name {
	case "append", "extend", "insert", "pop", "remove", "index", "count", "copy", "clear", "reverse", "sort":
		return true
	}
	return false
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

// attrParts parses an attribute path of Jinja2's make_attrgetter: "a.b.0" is looked up item
// by item, digits as indexes.
func attrParts(attr any) []any {
	switch x := attr.(type) {
	case nil:
		return nil
	case string, *tainted, Markup:
		s, _ := strValue(x)
		var parts []any
		for _, p := range strings.Split(s, ".") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				n, _ := strconv.ParseInt(p, 10, 64)
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
		return parts
	}
	return []any{attr}
}

// attrPath looks parts up in item; with def, an undefined step gives def.
func (e *evaluator) attrPath(item any, parts []any, def any) (any, error) {
	for _, part := range parts {
		if s, ok := part.(string); ok && isMapping(item) && !isDictMethod(s) {
			// The common case, without making an Undefined for a missing key.
			v, found, _ := mapGetStr(item, s)
			if !found {
				if def != nil {
					item = def
					continue
				}
				return undefinedAttr(item, s), nil
			}
			item = v
			continue
		}
		v, err := e.getItem(item, part)
		if err != nil {
			return nil, err
		}
		item = v
		if _, ok := item.(*Undefined); ok && def != nil {
			item = def
		}
	}
	return item, nil
}
