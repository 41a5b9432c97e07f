package jinja

import (
	"fmt"
	"math/big"

	"github.com/flosch/pongo2/v6"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// pongo2 hosts its own filters: a filter written pongo2's way (|name:arg), or one Jinja2
// does not have (|floatformat, |cut, |yesno, ...), runs pongo2's implementation, so a
// template written for pongo2 gets pongo2's behaviour. The engine only reads pongo2's filter
// table (pongo2.FilterExists, pongo2.ApplyFilter): it registers nothing there.

func pongo2Has(name string) bool {
	switch name {
	case "random", "date", "time":
		// random: every render would differ. date/time: they format time values, which the
		// context never holds.
		return false
	}
	return pongo2.FilterExists(name)
}

func pongo2Filter(name string) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if len(kw) > 0 {
			return nil, fmt.Errorf("pongo2's filter %s takes no keyword arguments", name)
		}
		if len(a) > 1 {
			return nil, fmt.Errorf("pongo2's filter %s takes at most one argument, %d given", name, len(a))
		}
		param := pongo2.AsValue(nil)
		if len(a) == 1 {
			param = toPongo2(e, a[0])
		}
		return callPongo2(name, toPongo2(e, in), param)
	}
}

// callPongo2 applies a pongo2 filter. pongo2's filters are a library the engine does not
// control: a panic in one (wordwrap's slice bounds, say) becomes an error, not a crash.
func callPongo2(name string, in, param *pongo2.Value) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("pongo2's filter %s failed on this value (%v)", name, r)
		}
	}()
	v, perr := pongo2.ApplyFilter(name, in, param)
	if perr != nil {
		msg := perr.Error()
		if perr.OrigError != nil {
			msg = perr.OrigError.Error()
		}
		return nil, fmt.Errorf("pongo2's filter %s: %s", name, msg)
	}
	return fromPongo2(v), nil
}

// toPongo2 converts a value for pongo2: plain Go values (records and the template's lists and
// dicts as Go maps and slices).
func toPongo2(e *evaluator, v any) *pongo2.Value {
	if m, ok := v.(Markup); ok {
		return pongo2.AsSafeValue(string(m))
	}
	return pongo2.AsValue(plainGo(e, v, 0))
}

func plainGo(e *evaluator, v any, depth int) any {
	if depth > maxReprDepth {
		return nil
	}
	switch x := v.(type) {
	case *Undefined:
		return nil
	case *tainted:
		return e.plain(x)
	case Markup:
		return string(x)
	case *big.Int:
		return x.String()
	case *List, []any, []string, []map[string]any, Tuple, *generator, *rangeVal:
		items, _ := e.iterate(v)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = plainGo(e, it, depth+1)
		}
		return out
	case *Dict, map[string]string, *record.Record, map[string]any:
		m := map[string]any{}
		eachItem(v, func(k, val any) bool {
			ks, err := strOf(k)
			if err == nil {
				m[ks] = plainGo(e, val, depth+1)
			}
			return true
		})
		return m
	}
	return v
}

// fromPongo2 converts pongo2's result back: Go ints become int64, slices and maps the
// template's own.
func fromPongo2(v *pongo2.Value) any {
	if v == nil || v.IsNil() {
		return nil
	}
	return fromGo(v.Interface(), 0)
}

func fromGo(v any, depth int) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return normBig(new(big.Int).SetUint64(uint64(x)))
	case float32:
		return float64(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return &List{items: out}
	case []any:
		if depth > maxReprDepth {
			return nil
		}
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = fromGo(it, depth+1)
		}
		return &List{items: out}
	case map[string]any:
		d := newDict(len(x))
		for _, k := range sortedKeys(x) {
			d.set(k, fromGo(x[k], depth+1))
		}
		return d
	case *pongo2.Value:
		return fromPongo2(x)
	}
	return v
}
