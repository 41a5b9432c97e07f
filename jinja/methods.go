package jinja

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/haproxy-sidecar/haproxy-sidecar/record"
)

// Python methods of the values templates see: str, list, dict, tuple, int, float, range,
// and the loop and cycler objects. Data from the context is read only: changing it
// (l.append on a list from the data) is an error, copy it first (|list, dict(d)).

func isStrMethod(name string) bool {
	switch name {
	case "capitalize", "casefold", "center", "count", "endswith", "find", "format", "format_map", "index",
		"isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
		"isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "partition",
		"removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
		"rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill", "expandtabs":
		return true
	}
	return false
}

func isListMethod(name string) bool {
	switch name {
	case "append", "extend", "insert", "pop", "remove", "index", "count", "copy", "clear", "reverse", "sort":
		return true
	}
	return false
}

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
		switch name {
		case "striptags":
			return striptags(string(o)), nil
		case "unescape":
			return unescapeHTML(string(o)), nil
		case "escape":
			return o, nil
		case "join":
			if err := argCount(name, a, 1, 1); err != nil {
				return nil, err
			}
			items, err := e.iterate(a[0])
			if err != nil {
				return nil, err
			}
			return e.strMethod(string(o), name, []any{Tuple(escapeArgsList(items))}, kw)
		}
		v, err := e.strMethod(string(o), name, escapeArgsList(a), kw)
		if s, ok := v.(string); ok && err == nil && name != "join" {
			switch name {
			case "count", "find", "rfind", "index", "rindex":
			default:
				return Markup(s), nil
			}
		}
		return v, err
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

func (e *evaluator) listMethod(obj any, name string, a []any, kw map[string]any) (any, error) {
	l, mutable := obj.(*List)
	switch name {
	case "index", "count":
		return e.seqSearch(listItems(obj), name, a)
	case "copy":
		return &List{items: append([]any(nil), listItems(obj)...)}, nil
	}
	if !mutable {
		return nil, fmt.Errorf("list.%s(): this list comes from the input data, which templates cannot change: copy it first (x|list)", name)
	}
	switch name {
	case "append":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		if err := e.checkItems(len(l.items) + 1); err != nil {
			return nil, err
		}
		l.items = append(l.items, a[0])
		return nil, nil
	case "extend":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		items, err := e.iterate(a[0])
		if err != nil {
			return nil, err
		}
		if err := e.checkItems(len(l.items) + len(items)); err != nil {
			return nil, err
		}
		l.items = append(l.items, items...)
		return nil, nil
	case "insert":
		if err := argCount(name, a, 2, 2); err != nil {
			return nil, err
		}
		i, ok := indexOf(a[0])
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
		}
		n := int64(len(l.items))
		if i < 0 {
			i = max(i+n, 0)
		}
		i = min(i, n)
		if err := e.checkItems(len(l.items) + 1); err != nil {
			return nil, err
		}
		l.items = append(l.items, nil)
		copy(l.items[i+1:], l.items[i:])
		l.items[i] = a[1]
		return nil, nil
	case "pop":
		if err := argCount(name, a, 0, 1); err != nil {
			return nil, err
		}
		if len(l.items) == 0 {
			return nil, errors.New("pop from empty list")
		}
		i := int64(len(l.items) - 1)
		if len(a) == 1 {
			var ok bool
			if i, ok = indexOf(a[0]); !ok {
				return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
			}
			if i < 0 {
				i += int64(len(l.items))
			}
			if i < 0 || i >= int64(len(l.items)) {
				return nil, errors.New("pop index out of range")
			}
		}
		v := l.items[i]
		l.items = append(l.items[:i], l.items[i+1:]...)
		return v, nil
	case "remove":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		for i, x := range l.items {
			if equal(x, a[0]) {
				l.items = append(l.items[:i], l.items[i+1:]...)
				return nil, nil
			}
		}
		return nil, errors.New("list.remove(x): x not in list")
	case "clear":
		l.items = l.items[:0]
		return nil, nil
	case "reverse":
		for i, j := 0, len(l.items)-1; i < j; i, j = i+1, j-1 {
			l.items[i], l.items[j] = l.items[j], l.items[i]
		}
		return nil, nil
	case "sort":
		if len(a) > 0 {
			return nil, errors.New("sort() takes no positional arguments")
		}
		reverse := false
		for k, v := range kw {
			if k != "reverse" {
				return nil, fmt.Errorf("sort() got an unexpected keyword argument '%s' (key= is not supported)", k)
			}
			reverse = truthy(v)
		}
		return nil, sortValues(l.items, func(x any) (any, error) { return x, nil }, reverse)
	}
	return nil, fmt.Errorf("'list' object has no attribute '%s'", name)
}

// sortValues sorts items stably by key, as Python's sorted() (reverse keeps stability).
func sortValues(items []any, key func(any) (any, error), reverse bool) error {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var err error
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		c, cerr := compare(a, b, "<")
		if cerr != nil && err == nil {
			err = cerr
		}
		return c < 0
	})
	if err != nil {
		return err
	}
	sorted := make([]any, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

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
		if err := argCount(name, a, 0, 1); err != nil {
			return nil, err
		}
		if len(a) == 1 {
			if err := e.updateDict(d, a[0]); err != nil {
				return nil, err
			}
		}
		for _, k := range sortedKeys(kw) {
			d.set(k, kw[k])
		}
		return nil, e.checkItems(d.len())
	case "setdefault":
		if err := argCount(name, a, 1, 2); err != nil {
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
	case "pop":
		if err := argCount(name, a, 1, 2); err != nil {
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
			r, _ := repr(a[0])
			return nil, fmt.Errorf("KeyError: %s", r)
		}
		return v, nil
	case "popitem":
		if d.len() == 0 {
			return nil, errors.New("popitem(): dictionary is empty")
		}
		k := d.keys[d.len()-1]
		v, _, _ := d.del(k)
		return Tuple{k, v}, nil
	case "clear":
		d.keys, d.vals, d.index = d.keys[:0], d.vals[:0], nil
		return nil, nil
	}
	return nil, fmt.Errorf("'dict' object has no attribute '%s'", name)
}

// updateDict adds the items of src (a dict or a sequence of pairs) to d.
func (e *evaluator) updateDict(d *Dict, src any) error {
	if isMapping(src) {
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

func (e *evaluator) strArg(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case *tainted:
		e.taint = x.src
		return x.s, nil
	case Markup:
		return string(x), nil
	}
	return "", fmt.Errorf("%s() argument must be str, not %s", name, typeName(v))
}

func (e *evaluator) strMethod(s, name string, a []any, kw map[string]any) (any, error) {
	if name != "format" && name != "format_map" && name != "split" && name != "rsplit" && name != "splitlines" && name != "expandtabs" {
		if err := noKeywords(name, kw); err != nil {
			return nil, err
		}
	}
	switch name {
	case "upper":
		return strings.ToUpper(s), nil
	case "lower", "casefold":
		return strings.ToLower(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "title":
		return pyTitle(s), nil
	case "swapcase":
		return strings.Map(func(r rune) rune {
			if unicode.IsUpper(r) {
				return unicode.ToLower(r)
			}
			return unicode.ToUpper(r)
		}, s), nil
	case "strip", "lstrip", "rstrip":
		if err := argCount(name, a, 0, 1); err != nil {
			return nil, err
		}
		if len(a) == 0 || a[0] == nil {
			switch name {
			case "strip":
				return strings.TrimFunc(s, isPySpace), nil
			case "lstrip":
				return strings.TrimLeftFunc(s, isPySpace), nil
			}
			return strings.TrimRightFunc(s, isPySpace), nil
		}
		cut, err := e.strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		switch name {
		case "strip":
			return strings.Trim(s, cut), nil
		case "lstrip":
			return strings.TrimLeft(s, cut), nil
		}
		return strings.TrimRight(s, cut), nil
	case "startswith", "endswith":
		if err := argCount(name, a, 1, 3); err != nil {
			return nil, err
		}
		sub := s
		if len(a) > 1 {
			runes := []rune(s)
			var lo, hi *int64
			if n, ok := indexOf(a[1]); ok {
				lo = &n
			}
			if len(a) > 2 {
				if n, ok := indexOf(a[2]); ok {
					hi = &n
				}
			}
			l, h := sliceBounds(int64(len(runes)), lo, hi, 1)
			if h < l {
				h = l
			}
			sub = string(runes[l:h])
		}
		test := strings.HasPrefix
		if name == "endswith" {
			test = strings.HasSuffix
		}
		if t, ok := a[0].(Tuple); ok {
			for _, x := range t {
				p, err := e.strArg(name, x)
				if err != nil {
					return nil, err
				}
				if test(sub, p) {
					return true, nil
				}
			}
			return false, nil
		}
		p, ok := strValue(a[0])
		if !ok {
			return nil, fmt.Errorf("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
		}
		e.plain(a[0])
		return test(sub, p), nil
	case "replace":
		if err := argCount(name, a, 2, 3); err != nil {
			return nil, err
		}
		old, err := e.strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		repl, err := e.strArg(name, a[1])
		if err != nil {
			return nil, err
		}
		n := -1
		if len(a) == 3 {
			c, ok := indexOf(a[2])
			if !ok {
				return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[2]))
			}
			n = int(c)
		}
		return e.replace(s, old, repl, n)
	case "split", "rsplit":
		return e.split(s, name, a, kw)
	case "splitlines":
		keep := false
		if len(a) > 0 {
			keep = truthy(a[0])
		}
		if v, ok := kw["keepends"]; ok {
			keep = truthy(v)
		}
		lines := splitLines(s, keep)
		out := make([]any, len(lines))
		for i, l := range lines {
			out[i] = l
		}
		return &List{items: out}, nil
	case "join":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		items, err := e.iterate(a[0])
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for i, it := range items {
			if i > 0 {
				b.WriteString(s)
			}
			str, ok := strValue(it)
			if !ok {
				return nil, fmt.Errorf("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			e.plain(it)
			if b.Len()+len(str) > e.maxSize {
				return nil, e.sizeError()
			}
			b.WriteString(str)
		}
		return b.String(), nil
	case "find", "rfind", "index", "rindex", "count":
		if err := argCount(name, a, 1, 3); err != nil {
			return nil, err
		}
		sub, err := e.strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		runes := []rune(s)
		var lo, hi *int64
		if len(a) > 1 {
			if n, ok := indexOf(a[1]); ok {
				lo = &n
			}
		}
		if len(a) > 2 {
			if n, ok := indexOf(a[2]); ok {
				hi = &n
			}
		}
		l, h := sliceBounds(int64(len(runes)), lo, hi, 1)
		if h < l {
			if name == "count" {
				return int64(0), nil
			}
			if name == "index" || name == "rindex" {
				return nil, errors.New("substring not found")
			}
			return int64(-1), nil
		}
		part := string(runes[l:h])
		if name == "count" {
			if sub == "" {
				return int64(utf8.RuneCountInString(part) + 1), nil
			}
			return int64(strings.Count(part, sub)), nil
		}
		var i int
		if name == "find" || name == "index" {
			i = strings.Index(part, sub)
		} else {
			i = strings.LastIndex(part, sub)
		}
		if i < 0 {
			if name == "index" || name == "rindex" {
				return nil, errors.New("substring not found")
			}
			return int64(-1), nil
		}
		return int64(utf8.RuneCountInString(part[:i])) + l, nil
	case "center", "ljust", "rjust":
		if err := argCount(name, a, 1, 2); err != nil {
			return nil, err
		}
		w, ok := indexOf(a[0])
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
		}
		fill := " "
		if len(a) == 2 {
			f, err := e.strArg(name, a[1])
			if err != nil {
				return nil, err
			}
			if utf8.RuneCountInString(f) != 1 {
				return nil, errors.New("The fill character must be exactly one character long")
			}
			fill = f
		}
		return e.justify(s, name, w, fill)
	case "zfill":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		w, ok := indexOf(a[0])
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(a[0]))
		}
		if err := e.checkSize(int(min(w, int64(e.maxSize)+1))); err != nil {
			return nil, err
		}
		n := utf8.RuneCountInString(s)
		if int64(n) >= w {
			return s, nil
		}
		pad := strings.Repeat("0", int(w)-n)
		if s != "" && (s[0] == '-' || s[0] == '+') {
			return s[:1] + pad + s[1:], nil
		}
		return pad + s, nil
	case "partition", "rpartition":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		sep, err := e.strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, errors.New("empty separator")
		}
		var i int
		if name == "partition" {
			i = strings.Index(s, sep)
			if i < 0 {
				return Tuple{s, "", ""}, nil
			}
		} else {
			i = strings.LastIndex(s, sep)
			if i < 0 {
				return Tuple{"", "", s}, nil
			}
		}
		return Tuple{s[:i], sep, s[i+len(sep):]}, nil
	case "removeprefix", "removesuffix":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		x, err := e.strArg(name, a[0])
		if err != nil {
			return nil, err
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(s, x), nil
		}
		return strings.TrimSuffix(s, x), nil
	case "format":
		return e.strFormat(s, a, kw)
	case "format_map":
		if err := argCount(name, a, 1, 1); err != nil {
			return nil, err
		}
		m := map[string]any{}
		eachItem(a[0], func(k, v any) bool {
			if ks, ok := strValue(k); ok {
				m[ks] = v
			}
			return true
		})
		return e.strFormat(s, nil, m)
	case "expandtabs":
		size := int64(8)
		if len(a) > 0 {
			size, _ = indexOf(a[0])
		}
		var b strings.Builder
		col := int64(0)
		for _, r := range s {
			switch r {
			case '\t':
				if size > 0 {
					n := size - col%size
					b.WriteString(strings.Repeat(" ", int(n)))
					col += n
				}
			case '\n', '\r':
				b.WriteRune(r)
				col = 0
			default:
				b.WriteRune(r)
				col++
			}
		}
		return b.String(), nil
	case "isdigit", "isdecimal", "isnumeric":
		return s != "" && all(s, unicode.IsDigit), nil
	case "isalpha":
		return s != "" && all(s, unicode.IsLetter), nil
	case "isalnum":
		return s != "" && all(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) }), nil
	case "isspace":
		return s != "" && all(s, isPySpace), nil
	case "isascii":
		return all(s, func(r rune) bool { return r < 128 }), nil
	case "isprintable":
		return all(s, isPrintable), nil
	case "isidentifier":
		if s == "" {
			return false, nil
		}
		for i, r := range s {
			if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
				return false, nil
			}
		}
		return true, nil
	case "islower":
		return pyIsLower(s), nil
	case "isupper":
		return pyIsUpper(s), nil
	case "istitle":
		return pyTitle(s) == s && strings.IndexFunc(s, unicode.IsLetter) >= 0, nil
	}
	return nil, fmt.Errorf("'str object' has no attribute %s", reprString(name))
}

func all(s string, pred func(rune) bool) bool {
	for _, r := range s {
		if !pred(r) {
			return false
		}
	}
	return true
}

func pyIsLower(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsLower(r) {
			cased = true
		}
	}
	return cased
}

func pyIsUpper(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsLower(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsUpper(r) {
			cased = true
		}
	}
	return cased
}

// capitalize is Python's str.capitalize: the first character upper case, the rest lower.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// pyTitle is Python's str.title: a letter after a non-letter starts a word.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsLetter(r)
	}
	return b.String()
}

func (e *evaluator) justify(s, how string, w int64, fill string) (any, error) {
	n := int64(utf8.RuneCountInString(s))
	if w <= n {
		return s, nil
	}
	if w*int64(len(fill)) > int64(e.maxSize) {
		return nil, e.sizeError()
	}
	pad := w - n
	switch how {
	case "ljust":
		return s + strings.Repeat(fill, int(pad)), nil
	case "rjust":
		return strings.Repeat(fill, int(pad)) + s, nil
	}
	left := pad/2 + (pad & w & 1)
	return strings.Repeat(fill, int(left)) + s + strings.Repeat(fill, int(pad-left)), nil
}

func (e *evaluator) replace(s, old, repl string, n int) (any, error) {
	count := strings.Count(s, old)
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	}
	if n >= 0 && n < count {
		count = n
	}
	if size := len(s) + count*(len(repl)-len(old)); size > e.maxSize {
		return nil, e.sizeError()
	}
	return strings.Replace(s, old, repl, n), nil
}

func (e *evaluator) split(s, name string, a []any, kw map[string]any) (any, error) {
	var sepV, maxV any = nil, int64(-1)
	if len(a) > 0 {
		sepV = a[0]
	}
	if len(a) > 1 {
		maxV = a[1]
	}
	for k, v := range kw {
		switch k {
		case "sep":
			sepV = v
		case "maxsplit":
			maxV = v
		default:
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", name, k)
		}
	}
	maxSplit, ok := indexOf(maxV)
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(maxV))
	}
	var parts []string
	if sepV == nil {
		fields := strings.FieldsFunc(s, isPySpace)
		if maxSplit >= 0 && int64(len(fields)) > maxSplit+1 {
			// Split at most maxSplit times on runs of whitespace, keeping the rest.
			parts = splitWhitespaceN(s, int(maxSplit), name == "rsplit")
		} else {
			parts = fields
		}
	} else {
		sep, err := e.strArg(name, sepV)
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, errors.New("empty separator")
		}
		switch {
		case maxSplit < 0:
			parts = strings.Split(s, sep)
		case name == "split":
			parts = strings.SplitN(s, sep, int(maxSplit)+1)
		default:
			parts = rsplitN(s, sep, int(maxSplit))
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return &List{items: out}, nil
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append([]string{s[i+len(sep):]}, out...)
		s = s[:i]
		n--
	}
	return append([]string{s}, out...)
}

func splitWhitespaceN(s string, n int, fromRight bool) []string {
	if fromRight {
		var out []string
		s = strings.TrimRightFunc(s, isPySpace)
		for n > 0 {
			i := strings.LastIndexFunc(s, isPySpace)
			if i < 0 {
				break
			}
			_, size := utf8.DecodeRuneInString(s[i:])
			out = append([]string{s[i+size:]}, out...)
			s = strings.TrimRightFunc(s[:i], isPySpace)
			n--
		}
		if s != "" {
			out = append([]string{s}, out...)
		}
		return out
	}
	var out []string
	s = strings.TrimLeftFunc(s, isPySpace)
	for n > 0 && s != "" {
		i := strings.IndexFunc(s, isPySpace)
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		s = strings.TrimLeftFunc(s[i:], isPySpace)
		n--
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// splitLines is Python's str.splitlines.
func splitLines(s string, keep bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		end := -1
		switch r {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			end = i + size
		case '\r':
			end = i + size
			if end < len(s) && s[end] == '\n' {
				end++
			}
		}
		if end < 0 {
			i += size
			continue
		}
		if keep {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start, i = end, end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
