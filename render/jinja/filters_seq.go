package jinja

import (
	"errors"
	"fmt"
	"strings"
)

// Jinja2's filters of sequences and dicts: length, first, last, join, list, items,
// dictsort, sort, unique, min, max, sum, reverse, slice, batch.

func fBatch(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("batch", a, kw, "linecount", "fill_with")
	if err != nil {
		return nil, err
	}
	n, ok := indexOf(p[0])
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	items, err := e.readItems(in) // copied into the batches
	if err != nil {
		return nil, err
	}
	// Each batch made at its size (the HTTPRoute model batches its 3,000 routes four times
	// per sync).
	var out []any
	var cur []any
	for i, it := range items {
		if int64(len(cur)) == n {
			out = append(out, &List{items: cur})
			cur = nil
		}
		if cur == nil {
			cur = make([]any, 0, max(0, min(n, int64(len(items)-i))))
		}
		cur = append(cur, it)
	}
	if len(cur) > 0 {
		if fill := argOr(p[1], nil); fill != nil && int64(len(cur)) < n {
			for int64(len(cur)) < n {
				cur = append(cur, fill)
			}
		}
		out = append(out, &List{items: cur})
	}
	return &generator{items: out}, nil
}

func fLength(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("length", a, kw); err != nil {
		return nil, err
	}
	if g, ok := in.(*generator); ok {
		_ = g
		return nil, errors.New("object of type 'generator' has no len()")
	}
	n, err := lengthOf(in)
	return int64(n), err
}

// ignoreCase lowers strings (the default of sort, dictsort, unique, min, max, groupby).
func ignoreCase(v any) any {
	switch x := v.(type) {
	case string:
		if l := strings.ToLower(x); l != x {
			return l
		}
		return v // already lower case: no new interface value (sorts call this per comparison)
	case Markup:
		return Markup(strings.ToLower(string(x)))
	case *tainted:
		return strings.ToLower(x.s)
	}
	return v
}

func fDictsort(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	keys, vals, err := dictsortItems(in, a, kw)
	if err != nil {
		return nil, err
	}
	// The pairs share one array; each is capped at its two items, so that nothing appended
	// to one can reach the next.
	n := len(keys)
	items, pairs := make([]any, n), make([]any, 2*n)
	for i := range keys {
		pairs[2*i], pairs[2*i+1] = keys[i], vals[i]
		items[i] = Tuple(pairs[2*i : 2*i+2 : 2*i+2])
	}
	return &List{items: items}, nil
}

// dictsortItems are the keys and the values of in, in the order dictsort gives its pairs (a
// for loop binds them without making the pairs: execFor).
func dictsortItems(in any, a []any, kw map[string]any) (keys, vals []any, err error) {
	p, err := bind("dictsort", a, kw, "case_sensitive", "by", "reverse")
	if err != nil {
		return nil, nil, err
	}
	pos := 0
	switch by, _ := strValue(argOr(p[1], "key")); by {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, nil, errors.New(`You can only sort by either "key" or "value"`)
	}
	if !isMapping(in) {
		if u, ok := in.(*Undefined); ok {
			return nil, nil, u.fail()
		}
		return nil, nil, fmt.Errorf("'%s' object has no attribute 'items'", typeName(in))
	}
	var ks, vs []any
	if d, ok := in.(*Dict); ok {
		ks, vs = d.keys, d.vals // read only, at once (the HTTPRoute model sorts dicts of 3,000 keys)
	} else {
		n := mapLen(in)
		ks, vs = make([]any, 0, n), make([]any, 0, n)
		eachItem(in, func(k, v any) bool {
			ks, vs = append(ks, k), append(vs, v)
			return true
		})
	}
	n := len(ks)
	by := ks
	if pos == 1 {
		by = vs
	}
	sortKeys := by
	if cs := truthy(argOr(p[0], false)); !cs {
		sortKeys = make([]any, n)
		for i, k := range by {
			sortKeys[i] = ignoreCase(k)
		}
	}
	idx, err := sortOrder(sortKeys, truthy(argOr(p[2], false)))
	if err != nil {
		return nil, nil, err
	}
	out := make([]any, 2*n)
	for i, j := range idx {
		out[i], out[n+i] = ks[j], vs[j]
	}
	return out[:n:n], out[n:], nil
}

func fFirst(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("first", a, kw); err != nil {
		return nil, err
	}
	if u, ok := in.(*Undefined); ok && u.err != nil {
		return nil, u.err
	}
	s, err := e.seqOf(in)
	if err != nil {
		return nil, err
	}
	if s.n == 0 {
		return undefinedHint("No first item, sequence was empty."), nil
	}
	return s.at(0), nil
}

func fLast(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("last", a, kw); err != nil {
		return nil, err
	}
	if _, ok := in.(*generator); ok {
		return nil, errors.New("'generator' object is not reversible")
	}
	s, err := e.seqOf(in)
	if err != nil {
		return nil, err
	}
	if s.n == 0 {
		return undefinedHint("No last item, sequence was empty."), nil
	}
	return s.at(s.n - 1), nil
}

func fJoin(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("join", a, kw, "d", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := e.readItems(in)
	if err != nil {
		return nil, err
	}
	sep, err := e.str(argOr(p[0], ""))
	if err != nil {
		return nil, err
	}
	attr := argOr(p[1], nil)
	parts := attrParts(attr)
	if s, ok := e.joinKept(items, sep, attr, parts); ok {
		return s, nil
	}
	var b strings.Builder
	for i, it := range items {
		if attr != nil {
			if it, err = e.attrPath(it, parts, nil); err != nil {
				return nil, err
			}
		}
		s, err := e.str(it)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString(sep)
		} else if n := len(items) * (len(s) + len(sep)); len(items) > 64 && n <= min(e.maxSize, 1<<22) {
			// Room for items as long as the first (uids): no copies on the way. Bounded: a
			// long first item says nothing of the others.
			b.Grow(n)
		}
		if b.Len()+len(s) > e.maxSize {
			return nil, e.sizeError()
		}
		b.WriteString(s)
		if i&1023 == 1023 {
			if err := e.checkTime(); err != nil {
				return nil, err
			}
		}
	}
	return b.String(), nil
}

func fList(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("list", a, kw); err != nil {
		return nil, err
	}
	if r, ok := in.(*rangeVal); ok {
		if err := e.checkItems(int(min(r.len(), int64(e.maxItems)+1))); err != nil {
			return nil, err
		}
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	if l, ok := in.(*List); ok {
		items = append([]any(nil), l.items...)
	}
	return &List{items: items}, nil
}

func fItems(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("items", a, kw); err != nil {
		return nil, err
	}
	if _, ok := in.(*Undefined); ok {
		return &generator{}, nil
	}
	if !isMapping(in) {
		return nil, errors.New("Can only get item pairs from a mapping.")
	}
	return &generator{items: viewItemsOf(&dictView{d: in, kind: viewItems})}, nil
}

func fMinMax(sign int) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		name := "min"
		if sign > 0 {
			name = "max"
		}
		p, err := bind(name, a, kw, "case_sensitive", "attribute")
		if err != nil {
			return nil, err
		}
		items, err := e.iterate(in)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefinedHint("No aggregated item, sequence was empty."), nil
		}
		cs := truthy(argOr(p[0], false))
		parts := attrParts(argOr(p[1], nil))
		key := func(x any) (any, error) {
			v, err := e.attrPath(x, parts, nil)
			if err != nil || cs {
				return v, err
			}
			return ignoreCase(v), nil
		}
		best := items[0]
		bk, err := key(best)
		if err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return nil, err
			}
			op := "<"
			if sign > 0 {
				op = ">"
			}
			c, err := compare(k, bk, op)
			if err != nil {
				return nil, err
			}
			if c*sign > 0 && c != 2 {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func fReverse(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("reverse", a, kw); err != nil {
		return nil, err
	}
	if s, ok := strValue(in); ok {
		e.plain(in)
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		if _, ok := in.(Markup); ok {
			return Markup(string(r)), nil
		}
		return string(r), nil
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, errors.New("argument must be iterable")
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return &generator{items: out}, nil
}

func fSlice(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("slice", a, kw, "slices", "fill_with")
	if err != nil {
		return nil, err
	}
	n, ok := indexOf(p[0])
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	if n <= 0 {
		return nil, errors.New("integer division or modulo by zero")
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	if err := e.checkItems(int(min(n, int64(e.maxItems)+1))); err != nil {
		return nil, err
	}
	total := int64(len(items))
	per := total / n
	extra := total % n
	offset := int64(0)
	fill := argOr(p[1], nil)
	var out []any
	for i := int64(0); i < n; i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		part := append([]any(nil), items[start:end]...)
		if fill != nil && i >= extra {
			part = append(part, fill)
		}
		out = append(out, &List{items: part})
	}
	return &generator{items: out}, nil
}

func fSort(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("sort", a, kw, "reverse", "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := e.readItems(in)
	if err != nil {
		return nil, err
	}
	cs := truthy(argOr(p[1], false))
	var attrs [][]any
	switch attr := argOr(p[2], nil).(type) {
	case nil:
		attrs = [][]any{nil}
	case string:
		for _, s := range strings.Split(attr, ",") {
			attrs = append(attrs, attrParts(s))
		}
	default:
		attrs = [][]any{attrParts(attr)}
	}
	key := func(x any) (any, error) {
		if len(attrs) == 1 {
			// One attribute: its value is the key ([x] < [y] as x < y), without a tuple per item.
			v, err := e.attrPath(x, attrs[0], nil)
			if err == nil && !cs {
				v = ignoreCase(v)
			}
			return v, err
		}
		keys := make(Tuple, len(attrs))
		for i, at := range attrs {
			v, err := e.attrPath(x, at, nil)
			if err != nil {
				return nil, err
			}
			if !cs {
				v = ignoreCase(v)
			}
			keys[i] = v
		}
		return &List{items: keys}, nil
	}
	reverse := truthy(argOr(p[0], false))
	if len(attrs) == 1 {
		args := seqArgs{reverse: reverse, cs: cs}
		if out, ok := e.seqKept("sort", items, argOr(p[2], nil), args, key); ok {
			return &List{items: out}, nil
		}
	}
	sorted, err := sortedValues(items, key, reverse)
	if err != nil {
		return nil, err
	}
	return &List{items: sorted}, nil
}

func fSum(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("sum", a, kw, "attribute", "start")
	if err != nil {
		return nil, err
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	total := argOr(p[1], int64(0))
	attr := argOr(p[0], nil)
	parts := attrParts(attr)
	// Lists added to a list: one list grown in place (a fresh one, as + makes), not a copy of
	// the total at each item, which made a sum of n lists cost n²/2 copies.
	var acc *List
	for _, it := range items {
		if attr != nil {
			if it, err = e.attrPath(it, parts, nil); err != nil {
				return nil, err
			}
		}
		if acc != nil && isList(it) {
			if err := e.checkItems(len(acc.items) + len(listItems(it))); err != nil {
				return nil, err
			}
			acc.items = append(acc.items, listItems(it)...)
			continue
		}
		if acc == nil && isList(total) && isList(it) {
			sum, err := e.addValues(total, it)
			if err != nil {
				return nil, err
			}
			acc = sum.(*List)
			total = acc
			continue
		}
		if _, isStr := strValue(total); isStr {
			return nil, errors.New("sum() can't sum strings [use ''.join(seq) instead]")
		}
		if total, err = e.arith("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// uniqueSet is the keys unique has seen: strings apart from the others.
type uniqueSet struct {
	strs   map[string]struct{}
	others map[hashKey]struct{}
}

// add adds k and says whether it was not there yet.
func (u *uniqueSet) add(k hashKey) bool {
	if k.kind == 's' {
		if _, dup := u.strs[k.s]; dup {
			return false
		}
		u.strs[k.s] = struct{}{}
		return true
	}
	if u.others == nil {
		u.others = map[hashKey]struct{}{}
	}
	if _, dup := u.others[k]; dup {
		return false
	}
	u.others[k] = struct{}{}
	return true
}

func fUnique(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("unique", a, kw, "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := e.readItems(in)
	if err != nil {
		return nil, err
	}
	cs := truthy(argOr(p[0], false))
	parts := attrParts(argOr(p[1], nil))
	key := func(it any) (any, error) {
		k, err := e.attrPath(it, parts, nil)
		if err == nil && !cs {
			k = ignoreCase(k)
		}
		return k, err
	}
	if out, ok := e.seqKept("unique", items, argOr(p[1], nil), seqArgs{unique: true, cs: cs}, key); ok {
		return &generator{items: out}, nil
	}
	// Sized once for every item (the Ingress example's merge of 20,000 routes: the map grown
	// step by step allocated 10 MB a build); string keys (most) in a map of strings, whose
	// hash is the string's, not that of a whole hashKey.
	seen := uniqueSet{strs: make(map[string]struct{}, len(items))}
	out := make([]any, 0, len(items))
	for _, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		hk, err := keyOf(k)
		if err != nil {
			return nil, err
		}
		if seen.add(hk) {
			out = append(out, it)
		}
	}
	return &generator{items: out}, nil
}
