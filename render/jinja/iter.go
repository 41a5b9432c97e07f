package jinja

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/haproxy-sidecar/haproxy-sidecar/inputs/record"
)

// seq is what a for loop walks: the items of a list, a dict (its keys), a dict view, a range
// or a string, read in place (the data is not copied).
type seq struct {
	live *List // a list of the template, walked live (as Python does: appending extends the loop)
	list []any // tuples, materialized values
	data []any // a list from the data
	strs []string
	maps []map[string]any
	rec  *record.Record
	keys []string // the sorted keys of a Go map from the data
	m    any      // that map
	view byte     // with rec or keys: viewKeys, viewValues or viewItems
	rng  *rangeVal
	n    int
}

// count is the number of items (a live list may grow while walked).
func (s *seq) count() int {
	if s.live != nil {
		return len(s.live.items)
	}
	return s.n
}

func (s *seq) at(i int) any {
	switch {
	case s.live != nil:
		return s.live.items[i]
	case s.list != nil:
		return s.list[i]
	case s.data != nil:
		return fromData(s.data[i])
	case s.strs != nil:
		return fromData(s.strs[i])
	case s.maps != nil:
		return s.maps[i]
	case s.rec != nil:
		switch s.view {
		case viewValues:
			return fromData(s.rec.Value(i))
		case viewItems:
			return Tuple{fromData(s.rec.Key(i)), fromData(s.rec.Value(i))}
		}
		return fromData(s.rec.Key(i))
	case s.keys != nil:
		k := s.keys[i]
		switch s.view {
		case viewValues:
			v, _, _ := mapGetStr(s.m, k)
			return v
		case viewItems:
			v, _, _ := mapGetStr(s.m, k)
			return Tuple{fromData(k), v}
		}
		return fromData(k)
	case s.rng != nil:
		return s.rng.at(int64(i))
	}
	return nil
}

// pair is the key and value of item i of an items() view, without making a tuple.
func (s *seq) pair(i int) (k, v any, ok bool) {
	if s.view != viewItems {
		return nil, nil, false
	}
	switch {
	case s.rec != nil:
		return fromData(s.rec.Key(i)), fromData(s.rec.Value(i)), true
	case s.keys != nil:
		v, _, _ := mapGetStr(s.m, s.keys[i])
		return fromData(s.keys[i]), v, true
	}
	return nil, nil, false
}

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
				chars[i] = retaint(c, x.(*tainted).src)
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

// viewSeq walks a dict from the data (keys, values or items) in place.
func viewSeq(d any, kind byte) (seq, bool) {
	switch m := d.(type) {
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

// length is Python's len(v).
func length(v any) (int, error) {
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
		return x.length, nil
	}
	if isMapping(v) {
		return mapLen(v), nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}
