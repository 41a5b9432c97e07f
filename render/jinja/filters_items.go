package jinja

import (
	"errors"
)

// Jinja2's filters that look into values by attribute: attr and groupby. (map, select and
// reject, which take other built-ins by name, are with the tables of names: builtins.go.)

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
	cs := truthy(argOr(p[2], false))
	def := argOr(p[1], nil)
	parts := attrParts(p[0])
	key := func(x any) (any, error) {
		v, err := e.attrPath(x, parts, def)
		if err != nil || cs {
			return v, err
		}
		return ignoreCase(v), nil
	}
	if items, err = sortedValues(items, key, false); err != nil {
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
