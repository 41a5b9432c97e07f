package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Python methods of the values templates see: which value has which method, and calling
// one. str, list and dict have a file each (methods_str.go, methods_list.go,
// methods_dict.go); tuple, range, int, float, the loop and cycler objects are here. Data
// from the context is read only: changing it (l.append on a list from the data) is an
// error, copy it first (|list, dict(d)).

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

func argCount(name string, a []any, min, max int) error {
	if len(a) < min || len(a) > max {
		if min == max {
			return fmt.Errorf("%s() takes exactly %d argument(s) (%d given)", name, min, len(a))
		}
		return fmt.Errorf("%s() takes from %d to %d arguments (%d given)", name, min, max, len(a))
	}
	return nil
}

func noKeywords(name string, kw map[string]any) error {
	if len(kw) > 0 {
		return fmt.Errorf("%s() takes no keyword arguments", name)
	}
	return nil
}

// callMethod calls obj.name(a..., kw...).
func (e *evaluator) callMethod(obj any, name string, a []any, kw map[string]any) (any, error) {
	switch o := obj.(type) {
	case string, *tainted:
		return e.strMethod(e.plain(o).(string), name, a, kw)
	case Markup:
		return e.markupMethod(o, name, a, kw)
	case *List, []any, []string, []map[string]any:
		return e.listMethod(obj, name, a, kw)
	case Tuple:
		return e.seqSearch(o, name, a)
	case *Dict, map[string]any, map[string]string, *record.Record:
		return e.dictMethod(obj, name, a, kw)
	case *loopCtx:
		switch name {
		case "cycle":
			if len(a) == 0 {
				return nil, errors.New("no items for cycling given")
			}
			return a[o.index0%len(a)], nil
		case "changed":
			if o.changedSet && seqEqual(o.changedLast, a) {
				return false, nil
			}
			o.changedSet, o.changedLast = true, append([]any(nil), a...)
			return true, nil
		}
	case *cycler:
		switch name {
		case "next":
			if len(o.items) == 0 {
				return nil, nil
			}
			v := o.items[o.pos]
			o.pos = (o.pos + 1) % len(o.items)
			return v, nil
		case "reset":
			o.pos = 0
			return nil, nil
		}
	case *rangeVal:
		items, _ := e.iterate(o)
		return e.seqSearch(items, name, a)
	case int64, *big.Int, bool:
		switch name {
		case "bit_length":
			return int64(toNum(o).big().BitLen()), nil
		case "conjugate":
			return normBig(toNum(o).big()), nil
		case "is_integer":
			return true, nil
		}
	case float64:
		switch name {
		case "is_integer":
			return !math.IsInf(o, 0) && o == math.Trunc(o), nil
		case "conjugate":
			return o, nil
		}
	}
	return nil, fmt.Errorf("%s has no attribute %s", reprString(objectTypeRepr(obj)), reprString(name))
}

func (e *evaluator) seqSearch(items []any, name string, a []any) (any, error) {
	switch name {
	case "count":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		n := int64(0)
		for _, x := range items {
			if equal(x, a[0]) {
				n++
			}
		}
		return n, nil
	case "index":
		if err := argCount(name, a, 1, 3); err != nil {
			return nil, err
		}
		for i, x := range items {
			if equal(x, a[0]) {
				return int64(i), nil
			}
		}
		r, _ := repr(a[0])
		return nil, fmt.Errorf("%s is not in list", r)
	}
	return nil, fmt.Errorf("no method %s", name)
}
