package jinja

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's str methods (and Markup's, which escape their arguments), for strings from the
// template and from the data alike.

func (e *evaluator) strArg(name string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case *tainted:
		e.consume(x)
		return x.s, nil
	case Markup:
		return string(x), nil
	}
	return "", fmt.Errorf("%s() argument must be str, not %s", name, typeName(v))
}

// markupMethod calls a method of a Markup string: its arguments are escaped, and a string
// result is Markup again (Markup's methods in markupsafe).
func (e *evaluator) markupMethod(o Markup, name string, a []any, kw map[string]any) (any, error) {
	switch name {
	case "striptags":
		return stripTags(string(o)), nil
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
}

func (e *evaluator) strMethod(s, name string, a []any, kw map[string]any) (any, error) {
	if name != "format" && name != "format_map" && name != "split" && name != "rsplit" && name != "splitlines" && name != "expandtabs" {
		if err := noKeywords(name, kw); err != nil {
			return nil, err
		}
	}
	switch name {
	case "upper", "lower", "casefold", "capitalize", "title", "swapcase":
		return strCase(s, name), nil
	case "strip", "lstrip", "rstrip":
		return e.strStrip(s, name, a)
	case "startswith", "endswith":
		return e.strStartsWith(s, name, a)
	case "replace":
		return e.strReplace(s, a)
	case "split", "rsplit":
		return e.pySplit(s, name, a, kw)
	case "splitlines":
		return strSplitLines(s, a, kw), nil
	case "join":
		return e.strJoin(s, a)
	case "find", "rfind", "index", "rindex", "count":
		return e.strFind(s, name, a)
	case "center", "ljust", "rjust":
		return e.strJustify(s, name, a)
	case "zfill":
		return e.strZfill(s, a)
	case "partition", "rpartition":
		return e.strPartition(s, name, a)
	case "removeprefix", "removesuffix":
		return e.strRemoveAffix(s, name, a)
	case "format":
		return e.strFormat(s, a, kw)
	case "format_map":
		return e.strFormatMap(s, a)
	case "expandtabs":
		return strExpandTabs(s, a), nil
	case "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isascii", "isprintable",
		"isidentifier", "islower", "isupper", "istitle":
		return strIs(s, name), nil
	}
	return nil, fmt.Errorf("'str object' has no attribute %s", reprString(name))
}

// strCase is upper, lower, casefold, capitalize, title and swapcase.
func strCase(s, name string) string {
	switch name {
	case "upper":
		return strings.ToUpper(s)
	case "lower", "casefold":
		return strings.ToLower(s)
	case "capitalize":
		return pyCapitalize(s)
	case "title":
		return pyTitle(s)
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, s)
}

// strStrip is strip, lstrip and rstrip: whitespace, or the characters given.
func (e *evaluator) strStrip(s, name string, a []any) (any, error) {
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
}

// strStartsWith is startswith and endswith: a prefix or a tuple of them, within s[start:end].
func (e *evaluator) strStartsWith(s, name string, a []any) (any, error) {
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
}

func (e *evaluator) strReplace(s string, a []any) (any, error) {
	const name = "replace"
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
	return e.pyReplace(s, old, repl, n)
}

func strSplitLines(s string, a []any, kw map[string]any) any {
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
	return &List{items: out}
}

// strJoin is sep.join(items): every item must be a string.
func (e *evaluator) strJoin(s string, a []any) (any, error) {
	const name = "join"
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
}

// strFind is find, rfind, index, rindex and count, within s[start:end] (in characters).
func (e *evaluator) strFind(s, name string, a []any) (any, error) {
	if err := argCount(name, a, 1, 3); err != nil {
		return nil, err
	}
	sub, err := e.strArg(name, a[0])
	if err != nil {
		return nil, err
	}
	if len(a) == 1 && utf8.ValidString(s) {
		return strFindWhole(s, name, sub)
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
	// The search within the bounds, its position from the string's start.
	r, err := strFindWhole(string(runes[l:h]), name, sub)
	if i, ok := r.(int64); ok && name != "count" && i >= 0 {
		return i + l, nil
	}
	return r, err
}

// strFindWhole is strFind over the whole of s, valid UTF-8 (the same characters as its
// runes): without a copy of s as runes, which costs more than the search (a count over the
// uids of 10,000 Ingresses, the example's blocks).
func strFindWhole(s, name, sub string) (any, error) {
	if name == "count" {
		if sub == "" {
			return int64(utf8.RuneCountInString(s) + 1), nil
		}
		return int64(strings.Count(s, sub)), nil
	}
	var i int
	if name == "find" || name == "index" {
		i = strings.Index(s, sub)
	} else {
		i = strings.LastIndex(s, sub)
	}
	if i < 0 {
		if name == "index" || name == "rindex" {
			return nil, errors.New("substring not found")
		}
		return int64(-1), nil
	}
	return int64(utf8.RuneCountInString(s[:i])), nil
}

// strJustify is center, ljust and rjust.
func (e *evaluator) strJustify(s, name string, a []any) (any, error) {
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
}

func (e *evaluator) strZfill(s string, a []any) (any, error) {
	const name = "zfill"
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
}

// strPartition is partition and rpartition.
func (e *evaluator) strPartition(s, name string, a []any) (any, error) {
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
}

// strRemoveAffix is removeprefix and removesuffix.
func (e *evaluator) strRemoveAffix(s, name string, a []any) (any, error) {
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
}

func (e *evaluator) strFormatMap(s string, a []any) (any, error) {
	if err := argCount("format_map", a, 1, 1); err != nil {
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
}

func strExpandTabs(s string, a []any) any {
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
	return b.String()
}

// strIs is the predicates isdigit, isalpha, islower...
func strIs(s, name string) bool {
	switch name {
	case "isdigit", "isdecimal", "isnumeric":
		return s != "" && allRunes(s, unicode.IsDigit)
	case "isalpha":
		return s != "" && allRunes(s, unicode.IsLetter)
	case "isalnum":
		return s != "" && allRunes(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) })
	case "isspace":
		return s != "" && allRunes(s, isPySpace)
	case "isascii":
		return allRunes(s, func(r rune) bool { return r < 128 })
	case "isprintable":
		return allRunes(s, isPrintable)
	case "isidentifier":
		if s == "" {
			return false
		}
		for i, r := range s {
			if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
				return false
			}
		}
		return true
	case "islower":
		return pyIsLower(s)
	case "isupper":
		return pyIsUpper(s)
	}
	return pyTitle(s) == s && strings.IndexFunc(s, unicode.IsLetter) >= 0 // istitle
}

func allRunes(s string, pred func(rune) bool) bool {
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

// pyCapitalize is Python's str.capitalize: the first character upper case, the rest lower.
func pyCapitalize(s string) string {
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

func (e *evaluator) pyReplace(s, old, repl string, n int) (any, error) {
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

func (e *evaluator) pySplit(s, name string, a []any, kw map[string]any) (any, error) {
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
		case maxSplit < 0 && name == "split":
			parts = e.splitKept(s, sep)
		case maxSplit < 0:
			parts = splitAll(s, sep)
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

// splitAll is strings.Split(s, sep) (sep not empty) in one pass over s: strings.Split counts
// the separators first, a second pass. A pass costs a call of IndexByte per occurrence of
// sep's first byte: the Ingress example splits the 10,000 uids it joins with commas at
// ",00", ",40"... in four passes (a comma every 37 bytes).
func splitAll(s, sep string) []string {
	var out []string
	for {
		i := strings.Index(s, sep)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+len(sep):]
	}
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
