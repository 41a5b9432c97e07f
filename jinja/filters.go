package jinja

import (
	"errors"
	"fmt"
	"html"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Jinja2's filters (jinja2/filters.py), with Python's argument binding: positional and
// keyword arguments by the names Jinja2 gives them.

type filterFunc func(e *evaluator, in any, a []any, kw map[string]any) (any, error)

// noArg marks a parameter that was not given.
type noArgType struct{}

var noArg any = noArgType{}

// bind matches arguments to parameters as Python does; missing ones are noArg.
func bind(name string, a []any, kw map[string]any, params ...string) ([]any, error) {
	if len(a) > len(params) {
		return nil, fmt.Errorf("%s() takes %d positional argument(s) but %d were given", name, len(params), len(a))
	}
	out := make([]any, len(params))
	for i := range out {
		if i < len(a) {
			out[i] = a[i]
		} else {
			out[i] = noArg
		}
	}
	for k, v := range kw {
		i := -1
		for j, p := range params {
			if p == k {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%s() got an unexpected keyword argument '%s'", name, k)
		}
		if i < len(a) {
			return nil, fmt.Errorf("%s() got multiple values for argument '%s'", name, k)
		}
		out[i] = v
	}
	return out, nil
}

func or(v, def any) any {
	if v == noArg {
		return def
	}
	return v
}

// lookupFilter finds a filter when compiling: the extras given to Compile, Jinja2's, then
// pongo2's own (pongo2's filter:arg syntax always means pongo2's filter).
func (p *Program) lookupFilter(name string, pongo2 bool) (filterFunc, error) {
	switch name {
	case "random":
		return nil, errors.New("filter random is not allowed: every render would differ and HAProxy would reload for nothing")
	case "urlize":
		return nil, errors.New("filter urlize is not supported (it makes HTML links)")
	}
	if fn, ok := p.filters[name]; ok {
		return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
			plain := make([]any, len(a)) // a may be the call's shared constant arguments
			for i, x := range a {
				plain[i] = e.plain(x)
			}
			return fn(e.plain(in), plain, kw)
		}, nil
	}
	if pongo2 && pongo2Has(name) {
		return pongo2Filter(name), nil
	}
	if fn := jinjaFilter(name); fn != nil {
		return fn, nil
	}
	if pongo2Has(name) {
		return pongo2Filter(name), nil
	}
	return nil, fmt.Errorf("unknown filter '%s'", name)
}

func jinjaFilter(name string) filterFunc {
	switch name {
	case "abs":
		return fAbs
	case "attr":
		return fAttr
	case "batch":
		return fBatch
	case "capitalize":
		return strFilter("capitalize", capitalize)
	case "center":
		return fCenter
	case "count", "length":
		return fLength
	case "d", "default":
		return fDefault
	case "dictsort":
		return fDictsort
	case "e", "escape":
		return fEscape
	case "filesizeformat":
		return fFilesizeformat
	case "first":
		return fFirst
	case "float":
		return fFloat
	case "forceescape":
		return fForceescape
	case "format":
		return fFormat
	case "groupby":
		return fGroupby
	case "indent":
		return fIndent
	case "int":
		return fInt
	case "join":
		return fJoin
	case "last":
		return fLast
	case "list":
		return fList
	case "lower":
		return strFilter("lower", strings.ToLower)
	case "upper":
		return strFilter("upper", strings.ToUpper)
	case "items":
		return fItems
	case "map":
		return fMap
	case "min":
		return fMinMax(-1)
	case "max":
		return fMinMax(1)
	case "pprint":
		return fPprint
	case "reject":
		return fSelect(false, false)
	case "rejectattr":
		return fSelect(false, true)
	case "select":
		return fSelect(true, false)
	case "selectattr":
		return fSelect(true, true)
	case "replace":
		return fReplace
	case "reverse":
		return fReverse
	case "round":
		return fRound
	case "safe":
		return fSafe
	case "slice":
		return fSlice
	case "sort":
		return fSort
	case "string":
		return fString
	case "striptags":
		return fStriptags
	case "sum":
		return fSum
	case "title":
		return strFilter("title", jinjaTitle)
	case "trim":
		return fTrim
	case "truncate":
		return fTruncate
	case "unique":
		return fUnique
	case "urlencode":
		return fURLEncode
	case "wordcount":
		return fWordcount
	case "wordwrap":
		return fWordwrap
	case "xmlattr":
		return fXmlattr
	case "tojson":
		return fTojson
	}
	return nil
}

// strFilter is a filter of one string with no arguments.
func strFilter(name string, fn func(string) string) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if _, err := bind(name, a, kw); err != nil {
			return nil, err
		}
		s, err := e.str(in)
		if err != nil {
			return nil, err
		}
		out := fn(s)
		if _, ok := in.(Markup); ok {
			return Markup(out), nil
		}
		return out, nil
	}
}

var wordBeginningSplit = regexp.MustCompile(`([-\s({\[<]+)`)

// jinjaTitle is the title filter: every word capitalized (words start after -, space and
// opening brackets).
func jinjaTitle(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range wordBeginningSplit.FindAllStringIndex(s, -1) {
		b.WriteString(capitalizeWord(s[last:m[0]]))
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(capitalizeWord(s[last:]))
	return b.String()
}

func capitalizeWord(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

func fAbs(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("abs", a, kw); err != nil {
		return nil, err
	}
	n := toNum(in)
	switch n.kind {
	case 'i':
		if n.i < 0 {
			return neg(n.i, true)
		}
		return n.i, nil
	case 'f':
		return math.Abs(n.f), nil
	case 'b':
		return normBig(new(big.Int).Abs(n.b)), nil
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(in))
}

func fAttr(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("attr", a, kw, "name")
	if err != nil {
		return nil, err
	}
	name, ok := strValue(p[0])
	if !ok {
		return nil, errors.New("attribute name must be string")
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	if isMapping(in) && !isDictMethod(name) {
		return undefinedAttr(in, name), nil // attr() reads attributes, not keys
	}
	return e.getAttr(in, name)
}

func fBatch(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("batch", a, kw, "linecount", "fill_with")
	if err != nil {
		return nil, err
	}
	n, ok := indexOf(p[0])
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	var out []any
	var cur []any
	for _, it := range items {
		if int64(len(cur)) == n {
			out = append(out, &List{items: cur})
			cur = nil
		}
		cur = append(cur, it)
	}
	if len(cur) > 0 {
		if fill := or(p[1], nil); fill != nil && int64(len(cur)) < n {
			for int64(len(cur)) < n {
				cur = append(cur, fill)
			}
		}
		out = append(out, &List{items: cur})
	}
	return &generator{items: out}, nil
}

func fCenter(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("center", a, kw, "width")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	w, ok := indexOf(or(p[0], int64(80)))
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	return e.justify(s, "center", w, " ")
}

func fLength(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("length", a, kw); err != nil {
		return nil, err
	}
	if g, ok := in.(*generator); ok {
		_ = g
		return nil, errors.New("object of type 'generator' has no len()")
	}
	n, err := length(in)
	return int64(n), err
}

func fDefault(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("default", a, kw, "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	_, undef := in.(*Undefined)
	if undef || (truthy(or(p[1], false)) && !truthy(in)) {
		return or(p[0], ""), nil
	}
	return in, nil
}

// ignoreCase lowers strings (the default of sort, dictsort, unique, min, max, groupby).
func ignoreCase(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ToLower(x)
	case Markup:
		return Markup(strings.ToLower(string(x)))
	case *tainted:
		return strings.ToLower(x.s)
	}
	return v
}

func fDictsort(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("dictsort", a, kw, "case_sensitive", "by", "reverse")
	if err != nil {
		return nil, err
	}
	pos := 0
	switch by, _ := strValue(or(p[1], "key")); by {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, errors.New(`You can only sort by either "key" or "value"`)
	}
	if !isMapping(in) {
		if u, ok := in.(*Undefined); ok {
			return nil, u.fail()
		}
		return nil, fmt.Errorf("'%s' object has no attribute 'items'", typeName(in))
	}
	var items []any
	eachItem(in, func(k, v any) bool {
		items = append(items, Tuple{k, v})
		return true
	})
	cs := truthy(or(p[0], false))
	err = sortValues(items, func(x any) (any, error) {
		v := x.(Tuple)[pos]
		if !cs {
			v = ignoreCase(v)
		}
		return v, nil
	}, truthy(or(p[2], false)))
	return &List{items: items}, err
}

func fEscape(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("escape", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return Markup(escapeString(s)), nil
}

func fForceescape(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("forceescape", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return Markup(escapeString(s)), nil
}

// escapeString is markupsafe.escape.
func escapeString(s string) string {
	if !strings.ContainsAny(s, `&<>'"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\'':
			b.WriteString("&#39;")
		case '"':
			b.WriteString("&#34;")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// escapeValue is escape(v) as Markup's operators apply it to their other operand.
func (e *evaluator) escapeValue(v any) (Markup, error) {
	if m, ok := v.(Markup); ok {
		return m, nil
	}
	s, err := e.str(v)
	if err != nil {
		return "", err
	}
	return Markup(escapeString(s)), nil
}

func escapeArgs(v any) any {
	switch x := v.(type) {
	case Tuple:
		return Tuple(escapeArgsList(x))
	case string:
		return Markup(escapeString(x))
	}
	return v
}

func escapeArgsList(a []any) []any {
	out := make([]any, len(a))
	for i, x := range a {
		if s, ok := x.(string); ok {
			out[i] = Markup(escapeString(s))
		} else {
			out[i] = x
		}
	}
	return out
}

func unescapeHTML(s string) string { return html.UnescapeString(s) }

var (
	stripCommentsRE = regexp.MustCompile(`(?s)<!--.*?-->`)
	stripTagsRE     = regexp.MustCompile(`(?s)<.*?>`)
)

// striptags is markupsafe's Markup.striptags: tags and comments removed, whitespace
// collapsed, entities decoded.
func striptags(s string) string {
	s = stripCommentsRE.ReplaceAllString(s, "")
	s = stripTagsRE.ReplaceAllString(s, "")
	return unescapeHTML(strings.Join(strings.FieldsFunc(s, isPySpace), " "))
}

func fStriptags(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("striptags", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	return striptags(s), nil
}

func fFilesizeformat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("filesizeformat", a, kw, "binary")
	if err != nil {
		return nil, err
	}
	b, err := toFloat(e, in)
	if err != nil {
		return nil, err
	}
	binary := truthy(or(p[0], false))
	base := 1000.0
	prefixes := []string{"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	if binary {
		base = 1024
		prefixes = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
	}
	switch {
	case b == 1:
		return "1 Byte", nil
	case b < base:
		return fmt.Sprintf("%d Bytes", int64(b)), nil
	}
	var unit float64
	var prefix string
	for i, pfx := range prefixes {
		unit = math.Pow(base, float64(i+2))
		prefix = pfx
		if b < unit {
			break
		}
	}
	return strconv.FormatFloat(base*b/unit, 'f', 1, 64) + " " + prefix, nil
}

// toFloat is Python's float(v).
func toFloat(e *evaluator, v any) (float64, error) {
	n := toNum(v)
	if n.kind != 0 {
		return n.float()
	}
	if s, ok := strValue(v); ok {
		e.plain(v)
		return parsePyFloat(s)
	}
	if u, ok := v.(*Undefined); ok {
		return 0, u.fail()
	}
	return 0, fmt.Errorf("float() argument must be a string or a real number, not '%s'", typeName(v))
}

func parsePyFloat(s string) (float64, error) {
	t := strings.TrimFunc(s, isPySpace)
	l := strings.ToLower(strings.TrimLeft(t, "+-"))
	switch l {
	case "inf", "infinity", "nan":
		f, _ := strconv.ParseFloat(strings.Replace(t, "infinity", "inf", 1), 64)
		if l == "nan" {
			return math.NaN(), nil
		}
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), nil
		}
		_ = f
		return math.Inf(1), nil
	}
	if !validUnderscores(t) {
		return 0, fmt.Errorf("could not convert string to float: %s", reprString(s))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !isRangeErr(err) || strings.ContainsAny(t, "xXpP") {
		return 0, fmt.Errorf("could not convert string to float: %s", reprString(s))
	}
	return f, nil
}

// validUnderscores: Python allows _ only between digits.
func validUnderscores(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && (i == 0 || i == len(s)-1 || !isDigitByte(s[i-1]) || !isDigitByte(s[i+1])) {
			return false
		}
	}
	return true
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

func fFloat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("float", a, kw, "default")
	if err != nil {
		return nil, err
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	f, err := toFloat(e, in)
	if err != nil {
		return or(p[0], 0.0), nil
	}
	return f, nil
}

func fInt(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("int", a, kw, "default", "base")
	if err != nil {
		return nil, err
	}
	def := or(p[0], int64(0))
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	base := int64(10)
	if b, ok := indexOf(or(p[1], int64(10))); ok {
		base = b
	}
	if s, ok := strValue(in); ok {
		e.plain(in)
		if v, err := parsePyInt(s, int(base)); err == nil {
			return v, nil
		}
		if f, err := parsePyFloat(s); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return floatToInt(f), nil
		}
		return def, nil
	}
	n := toNum(in)
	switch n.kind {
	case 'i':
		return n.i, nil
	case 'b':
		return n.b, nil
	case 'f':
		if math.IsInf(n.f, 0) || math.IsNaN(n.f) {
			return def, nil
		}
		return floatToInt(n.f), nil
	}
	return def, nil
}

func floatToInt(f float64) any {
	t := math.Trunc(f)
	if t >= -9.2e18 && t <= 9.2e18 {
		return int64(t)
	}
	b, _ := new(big.Float).SetFloat64(t).Int(nil)
	return normBig(b)
}

// parsePyInt is Python's int(s, base).
func parsePyInt(s string, base int) (any, error) {
	t := strings.TrimFunc(s, isPySpace)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if base == 0 || base == 16 || base == 8 || base == 2 {
		lower := strings.ToLower(t)
		switch {
		case strings.HasPrefix(lower, "0x") && (base == 0 || base == 16):
			t, base = t[2:], 16
		case strings.HasPrefix(lower, "0o") && (base == 0 || base == 8):
			t, base = t[2:], 8
		case strings.HasPrefix(lower, "0b") && (base == 0 || base == 2):
			t, base = t[2:], 2
		case base == 0:
			base = 10
			if len(t) > 1 && t[0] == '0' && strings.Trim(t, "0_") != "" {
				return nil, errors.New("invalid literal")
			}
		}
		t = strings.TrimPrefix(t, "_")
	}
	if t == "" || !validUnderscores(t) || base < 2 || base > 36 {
		return nil, fmt.Errorf("invalid literal for int() with base %d: %s", base, reprString(s))
	}
	b, ok := new(big.Int).SetString(strings.ReplaceAll(t, "_", ""), base)
	if !ok {
		return nil, fmt.Errorf("invalid literal for int() with base %d: %s", base, reprString(s))
	}
	if neg {
		b.Neg(b)
	}
	return normBig(b), nil
}

func fFormat(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if len(a) > 0 && len(kw) > 0 {
		return nil, errors.New("can't handle positional and keyword arguments at the same time")
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	if len(kw) > 0 {
		d := newDict(len(kw))
		for _, k := range sortedKeys(kw) {
			d.set(k, kw[k])
		}
		return e.percentFormat(s, d)
	}
	return e.percentFormat(s, Tuple(a))
}

// group is what groupby gives: a (grouper, list) named tuple.
type group struct {
	grouper any
	list    *List
}

func fGroupby(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("groupby", a, kw, "attribute", "default", "case_sensitive")
	if err != nil {
		return nil, err
	}
	if p[0] == noArg {
		return nil, errors.New("groupby() missing 1 required positional argument: 'attribute'")
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	items = append([]any(nil), items...)
	cs := truthy(or(p[2], false))
	def := or(p[1], nil)
	parts := attrParts(p[0])
	key := func(x any) (any, error) {
		v, err := e.attrPath(x, parts, def)
		if err != nil || cs {
			return v, err
		}
		return ignoreCase(v), nil
	}
	if err := sortValues(items, key, false); err != nil {
		return nil, err
	}
	var out []any
	var last any
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		if i == 0 || !equal(k, last) {
			g := &group{grouper: k, list: &List{}}
			if !cs {
				if g.grouper, err = e.attrPath(it, parts, def); err != nil {
					return nil, err
				}
			}
			out = append(out, g)
			last = k
		}
		g := out[len(out)-1].(*group)
		g.list.items = append(g.list.items, it)
	}
	return &List{items: out}, nil
}

// attrParts parses an attribute path of Jinja2's make_attrgetter: "a.b.0" is looked up item
// by item, digits as indexes.
func attrParts(attr any) []any {
	switch x := attr.(type) {
	case nil:
		return nil
	case string, *tainted, Markup:
		s, _ := strValue(x)
		var parts []any
		for _, p := range strings.Split(s, ".") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				n, _ := strconv.ParseInt(p, 10, 64)
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
		return parts
	}
	return []any{attr}
}

// attrPath looks parts up in item; with def, an undefined step gives def.
func (e *evaluator) attrPath(item any, parts []any, def any) (any, error) {
	for _, part := range parts {
		if s, ok := part.(string); ok && isMapping(item) && !isDictMethod(s) {
			// The common case, without making an Undefined for a missing key.
			v, found, _ := mapGetStr(item, s)
			if !found {
				if def != nil {
					item = def
					continue
				}
				return undefinedAttr(item, s), nil
			}
			item = v
			continue
		}
		v, err := e.getItem(item, part)
		if err != nil {
			return nil, err
		}
		item = v
		if _, ok := item.(*Undefined); ok && def != nil {
			item = def
		}
	}
	return item, nil
}

// attrTruthy is bool(attrPath(item, parts)) without making an Undefined for a missing key.
func (e *evaluator) attrTruthy(item any, parts []any) (bool, error) {
	for _, part := range parts {
		if s, ok := part.(string); ok && isMapping(item) && !isDictMethod(s) {
			v, found, _ := mapGetStr(item, s)
			if !found {
				return false, nil
			}
			item = v
			continue
		}
		v, err := e.getItem(item, part)
		if err != nil {
			return false, err
		}
		item = v
	}
	return truthy(item), nil
}

func fIndent(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("indent", a, kw, "width", "first", "blank")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	var ind string
	switch w := or(p[0], int64(4)).(type) {
	case string:
		ind = w
	default:
		n, ok := indexOf(w)
		if !ok {
			return nil, fmt.Errorf("can't multiply sequence by non-int of type '%s'", typeName(w))
		}
		if n > 0 {
			if err := e.checkSize(int(min(n, int64(e.maxSize)+1))); err != nil {
				return nil, err
			}
			ind = strings.Repeat(" ", int(n))
		}
	}
	if err := e.checkSize(len(s) + (strings.Count(s, "\n")+2)*len(ind)); err != nil {
		return nil, err
	}
	s += "\n"
	lines := splitLines(s, false)
	var rv string
	if truthy(or(p[2], false)) {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		var b strings.Builder
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteByte('\n')
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
		rv = b.String()
	}
	if truthy(or(p[1], false)) {
		rv = ind + rv
	}
	if _, ok := in.(Markup); ok {
		return Markup(rv), nil
	}
	return rv, nil
}

func fJoin(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("join", a, kw, "d", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	sep, err := e.str(or(p[0], ""))
	if err != nil {
		return nil, err
	}
	attr := or(p[1], nil)
	parts := attrParts(attr)
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

func fMap(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if !truthy(in) {
		if _, ok := in.(*generator); !ok {
			return &generator{}, nil
		}
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if len(a) == 0 {
		attr, ok := kw["attribute"]
		if !ok {
			return nil, errors.New("map requires a filter argument")
		}
		def := kw["default"]
		for k := range kw {
			if k != "attribute" && k != "default" {
				return nil, fmt.Errorf("Unexpected keyword argument %s", reprString(k))
			}
		}
		parts := attrParts(attr)
		for i, it := range items {
			if out[i], err = e.attrPath(it, parts, def); err != nil {
				return nil, err
			}
		}
		return &generator{items: out}, nil
	}
	name, ok := strValue(a[0])
	if !ok {
		return nil, fmt.Errorf("map: the filter name must be a string, not %s", typeName(a[0]))
	}
	fn := jinjaFilter(name)
	if fn == nil && name == "re_escape" || fn == nil {
		if ext, ok := e.prog.filters[name]; ok {
			fn = func(e *evaluator, in any, a []any, kw map[string]any) (any, error) { return ext(e.plain(in), a, kw) }
		} else if pongo2Has(name) && name != "random" {
			fn = pongo2Filter(name)
		} else {
			return nil, fmt.Errorf("No filter named %s.", reprString(name))
		}
	}
	for i, it := range items {
		var kwc map[string]any
		if len(kw) > 0 {
			kwc = make(map[string]any, len(kw))
			for k, v := range kw {
				kwc[k] = v
			}
		}
		if out[i], err = fn(e, it, append([]any(nil), a[1:]...), kwc); err != nil {
			return nil, err
		}
	}
	return &generator{items: out}, nil
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
		cs := truthy(or(p[0], false))
		parts := attrParts(or(p[1], nil))
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

func fPprint(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("pprint", a, kw); err != nil {
		return nil, err
	}
	return pformat(in)
}

func fSelect(keep, byAttr bool) filterFunc {
	return func(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
		if !truthy(in) {
			if _, ok := in.(*generator); !ok {
				return &generator{}, nil
			}
		}
		items, err := e.iterate(in)
		if err != nil {
			return nil, err
		}
		off := 0
		var attr any
		if byAttr {
			if len(a) == 0 {
				return nil, errors.New("Missing parameter for attribute name")
			}
			attr, off = a[0], 1
		}
		var test testFunc
		var targs []any
		if len(a) > off {
			name, ok := strValue(a[off])
			if !ok {
				return nil, fmt.Errorf("the test name must be a string, not %s", typeName(a[off]))
			}
			if test = lookupTest(name); test == nil {
				return nil, fmt.Errorf("No test named %s.", reprString(name))
			}
			targs = a[off+1:]
		}
		parts := attrParts(attr)
		out := make([]any, 0, len(items))
		for _, it := range items {
			var ok bool
			if byAttr && test == nil {
				if ok, err = e.attrTruthy(it, parts); err != nil {
					return nil, err
				}
				if ok == keep {
					out = append(out, it)
				}
				continue
			}
			v := it
			if byAttr {
				if v, err = e.attrPath(it, parts, nil); err != nil {
					return nil, err
				}
			}
			if test != nil {
				if ok, err = test(e, v, targs, kw); err != nil {
					return nil, err
				}
			} else {
				ok = truthy(v)
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &generator{items: out}, nil
	}
}

func fReplace(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("replace", a, kw, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	if p[0] == noArg || p[1] == noArg {
		return nil, errors.New("replace() missing required arguments 'old' and 'new'")
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	old, err := e.str(p[0])
	if err != nil {
		return nil, err
	}
	repl, err := e.str(p[1])
	if err != nil {
		return nil, err
	}
	n := -1
	if c := or(p[2], nil); c != nil {
		x, ok := indexOf(c)
		if !ok {
			return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(c))
		}
		n = int(x)
	}
	v, err := e.replace(s, old, repl, n)
	if m, ok := in.(Markup); ok && e.autoescape {
		_ = m
		return Markup(v.(string)), err
	}
	return v, err
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

func fRound(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("round", a, kw, "precision", "method")
	if err != nil {
		return nil, err
	}
	method, _ := strValue(or(p[1], "common"))
	if method != "common" && method != "ceil" && method != "floor" {
		return nil, errors.New("method must be common, ceil or floor")
	}
	prec, ok := indexOf(or(p[0], int64(0)))
	if !ok {
		return nil, fmt.Errorf("'%s' object cannot be interpreted as an integer", typeName(p[0]))
	}
	if u, ok := in.(*Undefined); ok {
		return nil, u.fail()
	}
	n := toNum(in)
	if n.kind == 0 {
		return nil, fmt.Errorf("type %s doesn't define __round__ method", typeName(in))
	}
	if method == "common" {
		if n.kind != 'f' {
			if prec >= 0 {
				if n.kind == 'b' {
					return n.b, nil
				}
				return n.i, nil
			}
			// round(int, -n): to a multiple of 10**n, half to even.
			f, _ := n.float()
			return floatToInt(roundHalfEven(f, prec)), nil
		}
		return roundHalfEven(n.f, prec), nil
	}
	f, err := n.float()
	if err != nil {
		return nil, err
	}
	scale := math.Pow(10, float64(prec))
	if method == "ceil" {
		return math.Ceil(f*scale) / scale, nil
	}
	return math.Floor(f*scale) / scale, nil
}

// roundHalfEven is Python's round(f, n): the decimal closest to the exact value of f, ties to
// even.
func roundHalfEven(f float64, n int64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	if n >= 0 {
		if n > 330 {
			return f
		}
		r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(n), 64), 64)
		return r
	}
	if n < -330 {
		return 0 * f
	}
	p := new(big.Float).SetPrec(2000).SetFloat64(f)
	scale := new(big.Float).SetPrec(2000).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(-n), nil))
	q := new(big.Float).SetPrec(2000).Quo(p, scale)
	qs := q.Text('f', 0) // rounds half to even
	qi, _ := new(big.Float).SetPrec(2000).SetString(qs)
	r, _ := qi.Mul(qi, scale).Float64()
	return r
}

func fSafe(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("safe", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	s, err := e.str(in)
	return Markup(s), err
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
	fill := or(p[1], nil)
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
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	items = append([]any(nil), items...)
	cs := truthy(or(p[1], false))
	var attrs [][]any
	switch attr := or(p[2], nil).(type) {
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
	err = sortValues(items, key, truthy(or(p[0], false)))
	return &List{items: items}, err
}

func fString(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("string", a, kw); err != nil {
		return nil, err
	}
	if m, ok := in.(Markup); ok {
		return m, nil
	}
	return e.str(in)
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
	total := or(p[1], int64(0))
	attr := or(p[0], nil)
	parts := attrParts(attr)
	for _, it := range items {
		if attr != nil {
			if it, err = e.attrPath(it, parts, nil); err != nil {
				return nil, err
			}
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

func fTrim(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("trim", a, kw, "chars")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	if c := or(p[0], nil); c != nil {
		cut, err := e.str(c)
		if err != nil {
			return nil, err
		}
		return strings.Trim(s, cut), nil
	}
	return strings.TrimFunc(s, isPySpace), nil
}

func fTruncate(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("truncate", a, kw, "length", "killwords", "end", "leeway")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	length, ok := indexOf(or(p[0], int64(255)))
	if !ok {
		return nil, errors.New("truncate: length must be an integer")
	}
	end, err := e.str(or(p[2], "..."))
	if err != nil {
		return nil, err
	}
	leeway, ok := indexOf(or(p[3], int64(5)))
	if !ok || p[3] == nil {
		leeway = 5
	}
	endLen := int64(utf8.RuneCountInString(end))
	if length < endLen {
		return nil, fmt.Errorf("expected length >= %d, got %d", endLen, length)
	}
	if leeway < 0 {
		return nil, fmt.Errorf("expected leeway >= 0, got %d", leeway)
	}
	r := []rune(s)
	if int64(len(r)) <= length+leeway {
		return s, nil
	}
	cut := string(r[:length-endLen])
	if truthy(or(p[1], false)) {
		return cut + end, nil
	}
	if i := strings.LastIndex(cut, " "); i >= 0 {
		cut = cut[:i]
	}
	return cut + end, nil
}

func fUnique(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("unique", a, kw, "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := e.iterate(in)
	if err != nil {
		return nil, err
	}
	cs := truthy(or(p[0], false))
	parts := attrParts(or(p[1], nil))
	seen := map[hashKey]bool{}
	var out []any
	for _, it := range items {
		k, err := e.attrPath(it, parts, nil)
		if err != nil {
			return nil, err
		}
		if !cs {
			k = ignoreCase(k)
		}
		hk, err := keyOf(k)
		if err != nil {
			return nil, err
		}
		if !seen[hk] {
			seen[hk] = true
			out = append(out, it)
		}
	}
	return &generator{items: out}, nil
}

// urlQuote is Python's urllib.parse.quote with safe "/" (or "" and + for spaces: forQS).
func urlQuote(s string, forQS bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '~':
			b.WriteByte(c)
		case c == '/' && !forQS:
			b.WriteByte(c)
		case c == ' ' && forQS:
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func fURLEncode(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("urlencode", a, kw); err != nil {
		return nil, err
	}
	if s, ok := strValue(in); ok {
		e.plain(in)
		return urlQuote(s, false), nil
	}
	var pairs []any
	switch {
	case isMapping(in):
		pairs = viewItemsOf(&dictView{d: in, kind: viewItems})
	default:
		items, err := e.iterate(in)
		if err != nil {
			s, err := e.str(in)
			if err != nil {
				return nil, err
			}
			return urlQuote(s, false), nil
		}
		pairs = items
	}
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		kv, err := e.unpack(p, 2)
		if err != nil {
			return nil, err
		}
		k, err := e.str(kv[0])
		if err != nil {
			return nil, err
		}
		v, err := e.str(kv[1])
		if err != nil {
			return nil, err
		}
		parts = append(parts, urlQuote(k, true)+"="+urlQuote(v, true))
	}
	return strings.Join(parts, "&"), nil
}

func fWordcount(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	if _, err := bind("wordcount", a, kw); err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	n, inWord := int64(0), false
	for _, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
		if w && !inWord {
			n++
		}
		inWord = w
	}
	return n, nil
}

func fWordwrap(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("wordwrap", a, kw, "width", "break_long_words", "wrapstring", "break_on_hyphens")
	if err != nil {
		return nil, err
	}
	s, err := e.str(in)
	if err != nil {
		return nil, err
	}
	width, ok := indexOf(or(p[0], int64(79)))
	if !ok {
		return nil, errors.New("wordwrap: width must be an integer")
	}
	if width <= 0 {
		return nil, fmt.Errorf("invalid width %d (must be > 0)", width)
	}
	wrap := "\n"
	if w := or(p[2], nil); w != nil {
		if wrap, err = e.str(w); err != nil {
			return nil, err
		}
	}
	breakLong := truthy(or(p[1], true))
	hyphens := truthy(or(p[3], true))
	lines := splitLines(s, false)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Join(textWrap(l, int(width), breakLong, hyphens), wrap)
	}
	res := strings.Join(out, wrap)
	return res, e.checkSize(len(res))
}

var attrKeyRE = regexp.MustCompile(`[\s/>=]`)

func fXmlattr(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("xmlattr", a, kw, "autospace")
	if err != nil {
		return nil, err
	}
	if !isMapping(in) {
		return nil, fmt.Errorf("'%s' object has no attribute 'items'", typeName(in))
	}
	var parts []string
	eachItem(in, func(k, v any) bool {
		if v == nil {
			return true
		}
		if _, ok := v.(*Undefined); ok {
			return true
		}
		ks, kerr := e.str(k)
		if kerr != nil {
			err = kerr
			return false
		}
		if attrKeyRE.MatchString(ks) {
			err = fmt.Errorf("Invalid character in attribute name: %s", reprString(ks))
			return false
		}
		vs, verr := e.escapeValue(v)
		if verr != nil {
			err = verr
			return false
		}
		parts = append(parts, escapeString(ks)+`="`+string(vs)+`"`)
		return true
	})
	if err != nil {
		return nil, err
	}
	rv := strings.Join(parts, " ")
	if truthy(or(p[0], true)) && rv != "" {
		rv = " " + rv
	}
	if e.autoescape {
		return Markup(rv), nil
	}
	return rv, nil
}

func fTojson(e *evaluator, in any, a []any, kw map[string]any) (any, error) {
	p, err := bind("tojson", a, kw, "indent")
	if err != nil {
		return nil, err
	}
	indent := -1
	if i := or(p[0], nil); i != nil {
		n, ok := indexOf(i)
		if !ok {
			return nil, errors.New("tojson: indent must be an integer")
		}
		indent = int(n)
	}
	s, err := e.toJSON(in, indent)
	if err != nil {
		return nil, err
	}
	s = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "'", `\u0027`).Replace(s)
	return Markup(s), nil
}
