package jinja

import (
	"errors"
	"fmt"
)

// Jinja2's global functions: range, dict, namespace, cycler, joiner (lipsum is random: not
// allowed). They are immutable values, shared by every render.

var (
	globalRange     = &builtin{name: "range", fn: gRange}
	globalDict      = &builtin{name: "dict", fn: gDict}
	globalNamespace = &builtin{name: "namespace", fn: gNamespace}
	globalCycler    = &builtin{name: "cycler", fn: gCycler}
	globalJoiner    = &builtin{name: "joiner", fn: gJoiner}
	globalLipsum    = &builtin{name: "lipsum", fn: func(*evaluator, []any, map[string]any) (any, error) {
		return nil, errors.New("lipsum() is not allowed: it is random, every render would differ")
	}}
)

func lookupBuiltin(name string) *builtin {
	switch name {
	case "range":
		return globalRange
	case "dict":
		return globalDict
	case "namespace":
		return globalNamespace
	case "cycler":
		return globalCycler
	case "joiner":
		return globalJoiner
	case "lipsum":
		return globalLipsum
	}
	return nil
}

func gRange(e *evaluator, a []any, kw map[string]any) (any, error) {
	if len(kw) > 0 {
		return nil, errors.New("range() takes no keyword arguments")
	}
	if len(a) == 0 || len(a) > 3 {
		return nil, fmt.Errorf("range expected at most 3 arguments, got %d", len(a))
	}
	var n [3]int64
	for i, v := range a {
		switch x := v.(type) {
		case int64:
			n[i] = x
		case bool:
			n[i] = boolInt(x)
		default:
			if toNum(v).kind == 'b' {
				return nil, errors.New("range() arguments beyond 64 bits are not supported")
			}
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(v))
		}
	}
	switch len(a) {
	case 1:
		return &rangeVal{start: 0, stop: n[0], step: 1}, nil
	case 2:
		return &rangeVal{start: n[0], stop: n[1], step: 1}, nil
	}
	if n[2] == 0 {
		return nil, errors.New("range() arg 3 must not be zero")
	}
	return &rangeVal{start: n[0], stop: n[1], step: n[2]}, nil
}

func gDict(e *evaluator, a []any, kw map[string]any) (any, error) {
	order := e.kwOrder
	if len(a) > 1 {
		return nil, fmt.Errorf("dict expected at most 1 argument, got %d", len(a))
	}
	d := newDict(len(kw))
	if len(a) == 1 {
		if err := e.updateDict(d, a[0]); err != nil {
			return nil, err
		}
	}
	for _, k := range order {
		if v, ok := kw[k]; ok {
			d.set(k, v)
		}
	}
	return d, e.checkItems(d.len())
}

func gNamespace(e *evaluator, a []any, kw map[string]any) (any, error) {
	order := e.kwOrder
	var ns *Namespace
	if len(a) == 0 {
		ns = &Namespace{attrs: newDict(len(order))}
	} else {
		d, err := gDict(e, a, nil)
		if err != nil {
			return nil, err
		}
		ns = &Namespace{attrs: d.(*Dict)}
	}
	for _, k := range order {
		if v, ok := kw[k]; ok {
			ns.attrs.set(k, v)
		}
	}
	return ns, nil
}

func gCycler(e *evaluator, a []any, kw map[string]any) (any, error) {
	if len(kw) > 0 {
		return nil, errors.New("cycler() takes no keyword arguments")
	}
	if len(a) == 0 {
		return nil, errors.New("at least one item has to be provided")
	}
	return &cycler{items: append([]any(nil), a...)}, nil
}

func gJoiner(e *evaluator, a []any, kw map[string]any) (any, error) {
	p, err := bind("joiner", a, kw, "sep")
	if err != nil {
		return nil, err
	}
	sep, err := e.str(argOr(p[0], ", "))
	if err != nil {
		return nil, err
	}
	return &joiner{sep: sep}, nil
}
