package jinja

import (
	"errors"
	"fmt"
)

// Jinja2's filters that look into each item by attribute or run a filter or test on it:
// attr, map, select, reject, selectattr, rejectattr, groupby.

func fAttr(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("attr", a, kw, "name")
	if err != nil {
		return nil, err
	}
	name, ok := strValue(p[0])
	if !ok {
		return nil, errors.New("attribute name must be string")
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	if isMapping(in) && !isDictMethod(name) {
		return undefinedAttr(in, name), nil // attr() reads attributes, not keys
	}
	return e.getAttr(in, name)
}

func fGroupby(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("groupby", a, kw, "attribute", "default", "case_sensitive")
	if err != nil {
		return nil, err
	}
	if p[0] == noArg {
		return nil, errors.New("groupby() missing 1 required positional argument: 'attribute'")
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	items = append([]any(nil), items...)
	cs := truthy(or(p[2], false))
	def := or(p[1], nil)
	parts := attrParts(p[0])
	key := func(x any) (any, error) {
		v, err := e.attrPath(x, parts, def)
		if err != nil || cs {
			return v, err
		}
		return ignoreCase(v), nil
	}
	if err := sortValues(items, key, false); err != nil {
		return nil, err
	}
	var out []any
	var last any
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		if i == 0 || !equal(k, last) {
			g := &group{grouper: k, list: &List{}}
			if !cs {
				if g.grouper, err = e.attrPath(it, parts, def); err != nil {
					return nil, err
				}
			}
			out = append(out, g)
			last = k
		}
		g := out[len(out)-1].(*group)
		g.list.items = append(g.list.items, it)
	}
	return &List{items: out}, nil
}

// attrTruthy is bool(attrPath(item, parts)) without making an Undefined for a missing key.
func (e *evaluator) attrTruthy(item any, parts []any) (bool, error) {
	for _, part := range parts {
		if s, ok := part.(string); ok && isMapping(item) && !isDictMethod(s) {
			v, found, _ := mapGetStr(item, s)
			if !found {
				return false, nil
			}
			item = v
			continue
		}
		v, err := e.getItem(item, part)
		if err != nil {
			return false, err
		}
		item = v
	}
	return truthy(item), nil
}

func fMap(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if !truthy(in) {
		if _, ok := in.(*generator); !ok {
			return &generator{}, nil
		}
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if len(a) == 0 {
		attr, ok := kw["attribute"]
		if !ok {
			return nil, errors.New("map requires a filter argument")
		}
		def := kw["default"]
		for k := range kw {
			if k != "attribute" && k != "default" {
				return nil, fmt.Errorf("Unexpected keyword argument %s", reprString(k))
			}
		}
		parts := attrParts(attr)
		for i, it := range items {
			if out[i], err = e.attrPath(it, parts, def); err != nil {
				return nil, err
			}
		}
		return &generator{items: out}, nil
	}
	name, ok := strValue(a[0])
	if !ok {
		return nil, fmt.Errorf("map: the filter name must be a string, not %s", typeName(a[0]))
	}
	fn := jinjaFilter(name)
	if fn == nil && name == "re_escape" || fn == nil {
		if ext, ok := e.prog.filters[name]; ok {
			fn = func(e *evaluator, in any, a []any, kw map[string]any) (any, error) { return ext(e.plain(in), a, kw) }
		} else if pongo2Has(name) && name != "random" {
			fn = pongo2Filter(name)
		} else {
			return nil, fmt.Errorf("No filter named %s.", reprString(name))
		}
	}
	for i, it := range items {
		var kwc map[string]any
		if len(kw) > 0 {
			kwc = make(map[string]any, len(kw))
			for k, v := range kw {
				kwc[k] = v
			}
		}
		if out[i], err = fn(e, it, append([]any(nil), a[1:]...), kwc); err != nil {
			return nil, err
		}
	}
	return &generator{items: out}, nil
}

func fSelect(keep, byAttr bool) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if !truthy(in) {
			if _, ok := in.(*generator); !ok {
				return &generator{}, nil
			}
		}
		items, err := e.iterate(in)
		if err != nil {
			return nil, err
		}
		off := 0
		var attr any
		if byAttr {
			if len(a) == 0 {
				return nil, errors.New("Missing parameter for attribute name")
			}
			attr, off = a[0], 1
		}
		var test testFunc
		var targs []any
		if len(a) > off {
			name, ok := strValue(a[off])
			if !ok {
				return nil, fmt.Errorf("the test name must be a string, not %s", typeName(a[off]))
			}
			if test = lookupTest(name); test == nil {
				return nil, fmt.Errorf("No test named %s.", reprString(name))
			}
			targs = a[off+1:]
		}
		parts := attrParts(attr)
		out := make([]any, 0, len(items))
		for _, it := range items {
			var ok bool
			if byAttr && test == nil {
				if ok, err = e.attrTruthy(it, parts); err != nil {
					return nil, err
				}
				if ok == keep {
					out = append(out, it)
				}
				continue
			}
			v := it
			if byAttr {
				if v, err = e.attrPath(it, parts, nil); err != nil {
					return nil, err
				}
			}
			if test != nil {
				if ok, err = test(e, v, targs, kw); err != nil {
					return nil, err
				}
			} else {
				ok = truthy(v)
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &generator{items: out}, nil
	}
}
