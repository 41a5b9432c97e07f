package jinja

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// Iteration: how a for loop walks a value (seqOf, a seq: value.go) and the items of any
// iterable (iterate), without copying the data.

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func notIterable(v any) error {
	return fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// seqOf returns how to walk v.
func (e *evaluator) seqOf(v any) (seq, error) {
	switch x := v.(type) {
	case *List:
		// Live, as Python walks it: a loop appending to its own list ends at the time budget.
		return seq{live: x, n: len(x.items)}, nil
	case []any:
		return seq{data: x, n: len(x)}, nil
	case []string:
		return seq{strs: x, n: len(x)}, nil
	case []map[string]any:
		return seq{maps: x, n: len(x)}, nil
	case Tuple:
		return seq{list: x, n: len(x)}, nil
	case *record.Record:
		return seq{rec: x, view: viewKeys, n: x.Len()}, nil
	case map[string]any:
		ks := sortedKeys(x)
		return seq{keys: ks, m: x, view: viewKeys, n: len(ks)}, nil
	case map[string]string:
		ks := sortedKeys(x)
		return seq{keys: ks, m: x, view: viewKeys, n: len(ks)}, nil
	case *Dict:
		keys := append([]any(nil), x.keys...)
		return seq{list: keys, n: len(keys)}, nil
	case *dictView:
		if s, ok := viewSeq(x.d, x.kind); ok {
			return s, nil
		}
		items := viewItemsOf(x)
		return seq{list: items, n: len(items)}, nil
	case *rangeVal:
		n := x.len()
		if n > int64(^uint(0)>>1) {
			return seq{}, e.sizeError()
		}
		return seq{rng: x, n: int(n)}, nil
	case string, *tainted, Markup:
		s, _ := strValue(x)
		chars := make([]any, 0, len(s))
		for _, r := range s {
			if r == utf8.RuneError {
				chars = append(chars, string(r))
				continue
			}
			chars = append(chars, string(r))
		}
		if _, ok := x.(*tainted); ok {
			for i, c := range chars {
				chars[i] = retaint(c, x.(*tainted).mark())
			}
		}
		if _, ok := x.(Markup); ok {
			for i, c := range chars {
				chars[i] = Markup(c.(string))
			}
		}
		return seq{list: chars, n: len(chars)}, nil
	case *generator:
		items := x.take()
		return seq{list: items, n: len(items)}, nil
	case *group:
		return seq{list: []any{x.grouper, x.list}, n: 2}, nil
	case *Undefined:
		if x.err != nil {
			return seq{}, x.err
		}
		return seq{list: []any{}}, nil
	case *loopCtx:
		return seq{}, fmt.Errorf("a loop object cannot be iterated here")
	}
	return seq{}, notIterable(v)
}

// viewSeq walks a dict from the data (keys, values or items) in place, or a dict of the
// template as it is now.
func viewSeq(d any, kind byte) (seq, bool) {
	switch m := d.(type) {
	case *Dict:
		return dictSeq(m, kind), true
	case *record.Record:
		return seq{rec: m, view: kind, n: m.Len()}, true
	case map[string]any:
		ks := sortedKeys(m)
		return seq{keys: ks, m: m, view: kind, n: len(ks)}, true
	case map[string]string:
		ks := sortedKeys(m)
		return seq{keys: ks, m: m, view: kind, n: len(ks)}, true
	}
	return seq{}, false
}

// iterate returns the items of v as a list (a copy the caller may keep).
func (e *evaluator) iterate(v any) ([]any, error) {
	s, err := e.seqOf(v)
	if err != nil {
		return nil, err
	}
	if s.live != nil {
		return append([]any(nil), s.live.items...), nil
	}
	if s.list != nil {
		if _, ok := v.(Tuple); ok {
			return append([]any(nil), s.list...), nil
		}
		return s.list, nil
	}
	if err := e.checkItems(s.n); err != nil {
		return nil, err
	}
	out := make([]any, s.n)
	for i := range out {
		out[i] = s.at(i)
	}
	return out, nil
}

// readItems returns the items of v to read at once, neither kept nor changed: a list's or a
// tuple's own (x in l, l.extend(m), l|join, l|sort copied a list to read it), else
// iterate's copy.
func (e *evaluator) readItems(v any) ([]any, error) {
	switch x := v.(type) {
	case *List:
		return x.items, nil
	case Tuple:
		return x, nil
	}
	return e.iterate(v)
}

// lengthOf is Python's len(v).
func lengthOf(v any) (int, error) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), nil
	case *tainted:
		return utf8.RuneCountInString(x.s), nil
	case Markup:
		return utf8.RuneCountInString(string(x)), nil
	case *List:
		return len(x.items), nil
	case []any:
		return len(x), nil
	case []string:
		return len(x), nil
	case []map[string]any:
		return len(x), nil
	case Tuple:
		return len(x), nil
	case *rangeVal:
		return int(x.len()), nil
	case *dictView:
		return mapLen(x.d), nil
	case *Undefined:
		if x.err != nil {
			return 0, x.err
		}
		return 0, nil
	case *Namespace:
		return 0, fmt.Errorf("object of type 'Namespace' has no len()")
	case *loopCtx:
		return x.count()
	}
	if isMapping(v) {
		return mapLen(v), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}

// unpack splits v into n values (a, b = v); the caller must not change them.
func (e *evaluator) unpack(v any, n int) ([]any, error) {
	if u, ok := v.(*Undefined); ok && u.err != nil {
		return nil, u.err
	}
	s, err := e.seqOf(v)
	if err != nil {
		return nil, fmt.Errorf("cannot unpack non-iterable %s object", typeName(v))
	}
	if s.n > n {
		return nil, fmt.Errorf("cannot unpack: too many values to unpack (expected %d)", n)
	}
	if s.n < n {
		return nil, fmt.Errorf("cannot unpack: not enough values to unpack (expected %d, got %d)", n, s.n)
	}
	// A tuple or a list of the template is its own items (the callers only read them): a, b
	// = pair, and for k, v in pairs, made a copy per item.
	switch {
	case s.list != nil:
		return s.list, nil
	case s.live != nil:
		return s.live.items, nil
	}
	out := make([]any, n)
	for i := range out {
		out[i] = s.at(i)
	}
	return out, nil
}

// dictSeq walks a template dict's keys, values or items as they are when the walk starts (a
// loop's body may change the dict): its keys and values copied into one array, and a tuple
// made only when an item is asked for as one (for k, v in d.items() binds the pair; a list
// of tuples per loop was most of a small loop's cost).
func dictSeq(d *Dict, kind byte) seq {
	n := len(d.keys)
	if n == 0 {
		return seq{view: kind}
	}
	kv := make([]any, 2*n)
	copy(kv, d.keys)
	copy(kv[n:], d.vals)
	return seq{dk: kv[:n:n], dv: kv[n:], view: kind, n: n}
}
