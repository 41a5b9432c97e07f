package jinja

import (
	"errors"
	"fmt"
)

// Python's dict methods, with Python 2's iteritems, itervalues, iterkeys and has_key. A dict
// from the data is read only: the methods that change a dict work on the template's own (*Dict).

func (e *evaluator) dictMethod(obj any, name string, a []any, kw map[string]any) (any, error) {
	switch name {
	case "items", "iteritems":
		return &dictView{d: obj, kind: viewItems}, argCount(name, a, 0, 0)
	case "keys", "iterkeys":
		return &dictView{d: obj, kind: viewKeys}, argCount(name, a, 0, 0)
	case "values", "itervalues":
		return &dictView{d: obj, kind: viewValues}, argCount(name, a, 0, 0)
	case "get":
		if err := argCount(name, a, 1, 2); err != nil {
			return nil, err
		}
		v, ok, err := mapGet(obj, a[0])
		if err != nil {
			return nil, err
		}
		if !ok {
			if len(a) == 2 {
				return a[1], nil
			}
			return nil, nil
		}
		return v, nil
	case "has_key":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		_, ok, err := mapGet(obj, a[0])
		return ok, err
	case "copy":
		d := newDict(mapLen(obj))
		eachItem(obj, func(k, v any) bool { d.set(k, v); return true })
		return d, nil
	}
	d, mutable := obj.(*Dict)
	if !mutable {
		return nil, fmt.Errorf("dict.%s(): this dict comes from the input data, which templates cannot change: copy it first (dict(x))", name)
	}
	switch name {
	case "update":
		return nil, e.dictUpdate(d, a, kw)
	case "setdefault":
		return e.dictSetdefault(d, a)
	case "pop":
		return dictPop(d, a)
	case "popitem":
		if d.len() == 0 {
			return nil, errors.New("popitem(): dictionary is empty")
		}
		k := d.keys[d.len()-1]
		v, _, _ := d.del(k)
		return Tuple{k, v}, nil
	case "clear":
		d.changing()
		d.keys, d.vals, d.index = d.keys[:0], d.vals[:0], nil
		return nil, nil
	}
	return nil, fmt.Errorf("'dict' object has no attribute '%s'", name)
}

// dictUpdate is d.update(other, **kw).
func (e *evaluator) dictUpdate(d *Dict, a []any, kw map[string]any) error {
	if err := argCount("update", a, 0, 1); err != nil {
		return err
	}
	if len(a) == 1 {
		if err := e.updateDict(d, a[0]); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(kw) {
		d.set(k, kw[k])
	}
	return e.checkItems(d.len())
}

// dictSetdefault is d.setdefault(key, default=None).
func (e *evaluator) dictSetdefault(d *Dict, a []any) (any, error) {
	if err := argCount("setdefault", a, 1, 2); err != nil {
		return nil, err
	}
	v, ok, err := d.get(a[0])
	if err != nil {
		return nil, err
	}
	if ok {
		return v, nil
	}
	var def any
	if len(a) == 2 {
		def = a[1]
	}
	if err := e.checkItems(d.len() + 1); err != nil {
		return nil, err
	}
	return def, d.set(a[0], def)
}

// dictPop is d.pop(key[, default]).
func dictPop(d *Dict, a []any) (any, error) {
	if err := argCount("pop", a, 1, 2); err != nil {
		return nil, err
	}
	v, ok, err := d.del(a[0])
	if err != nil {
		return nil, err
	}
	if !ok {
		if len(a) == 2 {
			return a[1], nil
		}
		return nil, fmt.Errorf("KeyError: %s", pyReprOrName(a[0]))
	}
	return v, nil
}

// updateDict adds the items of src (a dict or a sequence of pairs) to d.
func (e *evaluator) updateDict(d *Dict, src any) error {
	if isMapping(src) {
		if other, ok := src.(*Dict); ok {
			d.reserve(other.len())
		}
		var err error
		eachItem(src, func(k, v any) bool {
			err = d.set(k, v)
			return err == nil
		})
		return err
	}
	items, err := e.iterate(src)
	if err != nil {
		return err
	}
	for i, it := range items {
		pair, err := e.unpack(it, 2)
		if err != nil {
			return fmt.Errorf("dictionary update sequence element #%d has the wrong length", i)
		}
		if err := d.set(pair[0], pair[1]); err != nil {
			return err
		}
	}
	return nil
}
