package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Python methods of the values templates see: calling one (which value has which method is
// for attribute lookup to know: hasMethod, access.go). str, list and dict have a file each (methods_str.go, methods_list.go,
// methods_dict.go); tuple, range, int, float, the loop and cycler objects are here. Data
// from the context is read only: changing it (l.append on a list from the data) is an
// error, copy it first (|list, dict(d)).

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
